"""The regime environments (docs/benchmarks.md), and the safety variables that are always set."""

from __future__ import annotations

import pytest

from tpscope.runfolder.regimes import (
    SAFETY_ENV,
    apply_defaults,
    apply_in_process,
    infer_regime,
    nccl_env,
    regime_env,
    worker_env,
)

SAFETY = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def test_regime_variables_are_those_of_benchmarks_md():
    assert regime_env("nvlink") == {}
    assert regime_env("shm") == {"NCCL_P2P_DISABLE": "1"}
    assert regime_env("socket") == {
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "lo",
    }
    with pytest.raises(ValueError, match="unknown regime"):
        regime_env("infiniband")


@pytest.mark.parametrize("regime", ["nvlink", "shm", "socket"])
def test_worker_env_always_keeps_multicast_off(regime):
    base = {"PATH": "/bin", "NCCL_NVLS_ENABLE": "1", "NCCL_SHM_DISABLE": "1"}
    env = worker_env(regime, base)
    assert {k: env[k] for k in SAFETY} == SAFETY
    assert env["PATH"] == "/bin"
    # another regime's variable inherited from the shell is cleared unless this regime sets it
    assert ("NCCL_SHM_DISABLE" in env) == (regime == "socket")


def test_apply_in_process_and_infer_round_trip():
    for regime in ("nvlink", "shm", "socket"):
        environ = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "HOME": "/root"}
        apply_in_process(regime, environ)
        assert infer_regime(environ) == regime
        assert environ["HOME"] == "/root"
        assert {k: environ[k] for k in SAFETY_ENV} == SAFETY


def test_nccl_env_keeps_only_communication_variables():
    got = nccl_env(
        {
            "NCCL_P2P_DISABLE": "1",
            "HOME": "/root",
            "NVSHMEM_DISABLE_NVLS": "1",
            "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        }
    )
    assert got == {
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "NCCL_P2P_DISABLE": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }


def test_nccl_high_priority_is_a_default_the_user_can_override():
    assert worker_env("shm", {})["TORCH_NCCL_HIGH_PRIORITY"] == "1"
    assert worker_env("shm", {"TORCH_NCCL_HIGH_PRIORITY": "0"})["TORCH_NCCL_HIGH_PRIORITY"] == "0"
    environ = {"TORCH_NCCL_HIGH_PRIORITY": "0"}
    apply_in_process("nvlink", environ)
    assert environ["TORCH_NCCL_HIGH_PRIORITY"] == "0"
    environ = {"NCCL_NVLS_ENABLE": "1"}
    apply_defaults(environ)
    assert environ == {
        "TORCH_NCCL_HIGH_PRIORITY": "1",
        "NCCL_P2P_PCI_CHUNKSIZE": "524288",
        **SAFETY,
    }


def test_send_recv_steps_of_512_kib_are_a_default_the_user_can_override():
    assert worker_env("socket", {})["NCCL_P2P_PCI_CHUNKSIZE"] == str(512 * 1024)
    assert (
        worker_env("shm", {"NCCL_P2P_PCI_CHUNKSIZE": "131072"})["NCCL_P2P_PCI_CHUNKSIZE"]
        == "131072"
    )
    environ = {"NCCL_P2P_PCI_CHUNKSIZE": "2097152"}
    apply_in_process("shm", environ)
    assert environ["NCCL_P2P_PCI_CHUNKSIZE"] == "2097152"
