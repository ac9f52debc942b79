"""Launching: the out-folder rule, the workers' environment, the torchrun command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tpscope.errors import UserError
from tpscope.fusion.launch import (
    Rendezvous,
    child_env,
    inside_torchrun,
    prepare_out_dir,
    torchrun_command,
)


def test_out_folder_is_refused_unless_overwrite(tmp_path):
    run = tmp_path / "run"
    prepare_out_dir(str(run), overwrite=False)  # absent: created
    assert run.is_dir()
    prepare_out_dir(str(run), overwrite=False)  # empty: fine
    (run / "rank0.1.pt.trace.json.gz").write_bytes(b"x")
    (run / "tpscope_run.json").write_text("{}")
    (run / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty .*--overwrite"):
        prepare_out_dir(str(run), overwrite=False)
    prepare_out_dir(str(run), overwrite=True)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]  # only the old run's files go
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        prepare_out_dir(str(tmp_path / "file"), overwrite=True)


def test_child_env_sets_regime_and_safety():
    env = child_env("socket", {"PYTHONPATH": "/elsewhere", "NCCL_NVLS_ENABLE": "1"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1" and env["NCCL_SOCKET_IFNAME"] == "lo"
    first, *rest = env["PYTHONPATH"].split(os.pathsep)
    assert Path(first, "tpscope", "fusion", "launch.py").is_file() and rest == ["/elsewhere"]
    inherited = child_env("", {"NCCL_P2P_DISABLE": "1", "TORCH_NCCL_HIGH_PRIORITY": "0"})
    assert inherited["NCCL_P2P_DISABLE"] == "1" and inherited["NCCL_NVLS_ENABLE"] == "0"
    assert inherited["TORCH_NCCL_HIGH_PRIORITY"] == "0" and env["TORCH_NCCL_HIGH_PRIORITY"] == "1"


def test_torchrun_command_and_detection():
    cmd = torchrun_command(3, "tpscope.fusion.worker", ["--x"])
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc-per-node=3" in cmd and "--standalone" in cmd
    assert cmd[-2:] == ["tpscope.fusion.worker", "--x"]
    assert inside_torchrun({"RANK": "0", "WORLD_SIZE": "2"}) and not inside_torchrun({"RANK": "0"})


def test_multi_node_options_replace_standalone():
    rdzv = Rendezvous(nnodes="2", node_rank=1, rdzv_endpoint="10.0.0.1:29400", rdzv_backend="c10d", rdzv_id="job")
    cmd = torchrun_command(4, "tpscope.fusion.worker", ["--x"], rdzv)
    assert "--standalone" not in cmd
    assert cmd[3:8] == ["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=10.0.0.1:29400", "--rdzv-backend=c10d",
                        "--rdzv-id=job"]
    assert Rendezvous(nnodes="1:4", rdzv_endpoint="h:1").max_nodes == 4
    with pytest.raises(UserError, match="--rdzv-endpoint"):
        Rendezvous(nnodes="2")
