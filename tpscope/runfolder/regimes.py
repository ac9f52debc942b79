"""The NCCL environment of each interconnect regime (docs/benchmarks.md), the defaults the runtime
measured to win, and the safety variables.

Every process the runtime starts or joins gets SAFETY_ENV: NVLink multicast can take a shared
host's GPUs out of service, so it is kept off in NCCL, torch's symmetric memory and NVSHMEM.
"""

from __future__ import annotations

from collections.abc import Mapping

SAFETY_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

DEFAULT_ENV: dict[str, str] = {
    # NCCL's streams at high priority: a collective's blocks are scheduled between the waves of
    # a GEMM launched beside it instead of after all of them. Measured on 2 x H200
    # (benchmarks/results/h200x2-benchp-*.json): ring/k2 GEMM-RS at the reference shape on NVLink
    # went from E 0.25 to E 0.85; no change in shm. Kept unless the user set it.
    "TORCH_NCCL_HIGH_PRIORITY": "1",
    # NCCL's send/recv in 512 KiB steps where its path is neither NVLink nor the network (NCCL's
    # default there is 128 KiB). Measured on 2 x H200 in shm (one bench per
    # setting): the ring's GEMM-RS k8/m4 went from 3.318 to 2.911 ms (unfused 5.10) and its
    # AG-GEMM k8/m16 from 3.299 to 2.995; the collectives, which do not use it, did not move.
    # End to end the ring k=4 trained 1.279x unfused against 1.215x. 2 MiB
    # steps were slower than 512 KiB. Kept unless the user set it.
    "NCCL_P2P_PCI_CHUNKSIZE": "524288",
}

REGIME_ENV: dict[str, dict[str, str]] = {
    "nvlink": {},
    "shm": {"NCCL_P2P_DISABLE": "1"},
    "socket": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"},
    "gloo": {},  # a CPU run (launch.CPU_REGIME): gloo over TCP, no NCCL variable applies
}

# Variables a regime may set; cleared from an inherited environment so that regimes do not mix.
REGIME_KEYS = sorted({k for env in REGIME_ENV.values() for k in env})


def regime_env(regime: str) -> dict[str, str]:
    """The variables a regime sets (the manifest records them)."""
    try:
        return dict(REGIME_ENV[regime])
    except KeyError:
        raise ValueError(f"unknown regime {regime!r}: use nvlink, shm or socket") from None


def worker_env(regime: str, base: Mapping[str, str]) -> dict[str, str]:
    """The environment for worker processes: `base` without other regimes' keys, plus this
    regime's variables and, always, SAFETY_ENV."""
    env = {**DEFAULT_ENV, **{k: v for k, v in base.items() if k not in REGIME_KEYS}}
    env.update(regime_env(regime))
    env.update(SAFETY_ENV)
    return env


def apply_in_process(regime: str, environ: dict[str, str]) -> None:
    """Set a regime's and the safety variables in this process (a rank that joined a torchrun the
    user started); must run before the process group creates its NCCL communicators."""
    for key in REGIME_KEYS:
        environ.pop(key, None)
    environ.update(regime_env(regime))
    apply_defaults(environ)


def apply_defaults(environ: dict[str, str]) -> None:
    """DEFAULT_ENV where the user did not choose, and SAFETY_ENV always."""
    for key, value in DEFAULT_ENV.items():
        environ.setdefault(key, value)
    environ.update(SAFETY_ENV)


def infer_regime(environ: Mapping[str, str]) -> str:
    """The regime an inherited environment amounts to (when the user gave no `--regime`)."""
    if environ.get("NCCL_P2P_DISABLE") == "1":
        return "socket" if environ.get("NCCL_SHM_DISABLE") == "1" else "shm"
    return "nvlink"


RECORDED_PREFIXES = (
    "NCCL_",
    "NVSHMEM_",
    "TORCH_SYMM_MEM",
    "TORCH_NCCL",
    "CUDA_DEVICE_MAX_CONNECTIONS",
)
"""The variables a manifest's `nccl_env` records (the report compares them between runs)."""


LOGGING_PREFIXES = ("NCCL_DEBUG",)
"""Recorded variables that change what NCCL prints, not what it does."""


def nccl_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The NCCL_*, TORCH_*SYMM* and NVSHMEM_* variables in force (recorded in the manifest)."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith(RECORDED_PREFIXES)}


def transport_settings(recorded: Mapping[str, str]) -> dict[str, str]:
    """Of `nccl_env`'s variables (or a manifest's record of them), those that change what the
    transport does: logging left out. auto's probe cache and the report compare these."""
    return {k: v for k, v in sorted(recorded.items()) if not k.startswith(LOGGING_PREFIXES)}
