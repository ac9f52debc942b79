"""Launching: the out-folder rule, the workers' environment, the torchrun command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fusion._cli import REPO, TINY_MODEL
from tpscope.errors import UserError
from tpscope.fusion.launch.torchrun import (
    Rendezvous,
    child_env,
    inside_torchrun,
    torchrun_command,
)
from tpscope.runfolder.layout import MANIFEST_NAME


def test_child_env_sets_regime_and_safety():
    env = child_env("socket", {"PYTHONPATH": "/elsewhere", "NCCL_NVLS_ENABLE": "1"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1" and env["NCCL_SOCKET_IFNAME"] == "lo"
    first, *rest = env["PYTHONPATH"].split(os.pathsep)
    assert Path(first, "tpscope", "fusion", "launch", "torchrun.py").is_file() and rest == [
        "/elsewhere"
    ]
    inherited = child_env("", {"NCCL_P2P_DISABLE": "1", "TORCH_NCCL_HIGH_PRIORITY": "0"})
    assert inherited["NCCL_P2P_DISABLE"] == "1" and inherited["NCCL_NVLS_ENABLE"] == "0"
    assert inherited["TORCH_NCCL_HIGH_PRIORITY"] == "0" and env["TORCH_NCCL_HIGH_PRIORITY"] == "1"


def test_torchrun_command_and_detection():
    cmd = torchrun_command(3, "tpscope.fusion.run.worker", ["--x"])
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc-per-node=3" in cmd and "--standalone" in cmd
    assert cmd[-2:] == ["tpscope.fusion.run.worker", "--x"]
    assert inside_torchrun({"RANK": "0", "WORLD_SIZE": "2"}) and not inside_torchrun({"RANK": "0"})


def test_multi_node_options_replace_standalone():
    rdzv = Rendezvous(
        nnodes="2", node_rank=1, rdzv_endpoint="10.0.0.1:29400", rdzv_backend="c10d", rdzv_id="job"
    )
    cmd = torchrun_command(4, "tpscope.fusion.run.worker", ["--x"], rdzv)
    assert "--standalone" not in cmd
    assert cmd[3:8] == [
        "--nnodes=2",
        "--node-rank=1",
        "--rdzv-endpoint=10.0.0.1:29400",
        "--rdzv-backend=c10d",
        "--rdzv-id=job",
    ]
    assert Rendezvous(nnodes="1:4", rdzv_endpoint="h:1").max_nodes == 4
    with pytest.raises(UserError, match="--rdzv-endpoint"):
        Rendezvous(nnodes="2")


@pytest.mark.parametrize(
    "options, words",
    [
        ({"nnodes": "2:1", "rdzv_endpoint": "h:1"}, "--nnodes 2:1: MIN is larger than MAX"),
        ({"node_rank": 1}, "--node-rank 1: the job has 1 node (ranks 0 to 0"),
        ({"nnodes": "2", "node_rank": 2, "rdzv_endpoint": "h:1"}, "--node-rank 2: the job has"),
        ({"nnodes": "2", "rdzv_endpoint": "h:x"}, "--rdzv-endpoint h:x: give HOST:PORT"),
        ({"nnodes": "2", "rdzv_endpoint": ":1"}, "--rdzv-endpoint :1: give HOST:PORT"),
        ({"nnodes": "2", "rdzv_endpoint": "h:70000"}, "--rdzv-endpoint h:70000: give HOST:PORT"),
        ({"nnodes": "2", "rdzv_endpoint": "h:1", "rdzv_backend": "zk"}, "--rdzv-backend zk"),
    ],
)
def test_launch_flags_are_checked_before_torchrun(options, words):
    with pytest.raises(UserError) as err:
        Rendezvous(**options)
    assert words in str(err.value) and "\n" not in str(err.value)


TINY = ["--device", "cpu", "--profile-steps", "1", *TINY_MODEL, "--timeout-s", "60"]


def _start_run(out: Path, steps: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpscope.cli",
            "run",
            *TINY,
            "--steps",
            str(steps),
            "--out",
            str(out),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_two_runs_started_together_into_one_folder_one_runs_the_other_refuses(tmp_path):
    out = tmp_path / "run"
    procs = [_start_run(out, 4), _start_run(out, 4)]
    done = [(p.wait(timeout=150), *p.communicate()) for p in procs]
    codes = sorted(rc for rc, _, _ in done)
    assert codes == [0, 2], [(rc, err[-500:]) for rc, _, err in done]
    refused = next(err for rc, _, err in done if rc == 2)
    assert refused.count("\n") == 1 and f"--out {out}: another tpscope run (pid " in refused
    manifest = json.loads((out / "tpscope_run.jsonc").read_text())
    assert manifest["complete"] is True and len(manifest["step_times_ms"]) == 4


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_a_stopped_run_stops_torchrun_and_every_worker_and_is_marked_incomplete(
    tmp_path, capsys, how
):
    import psutil

    from tpscope.cli import main

    out = tmp_path / "run"
    proc = _start_run(out, 3000)
    for line in proc.stdout:  # the profiled step (3) is written by then
        if line.startswith("step 6/3000"):
            break
    else:
        raise AssertionError(proc.stderr.read()[-3000:])
    tree = psutil.Process(proc.pid).children(recursive=True)
    assert len(tree) >= 3, tree  # torchrun's agent and two workers
    start = time.monotonic()
    os.kill(proc.pid, getattr(signal, how))
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, f"still running 10 s after {how}: {alive}"
    rc = proc.wait(timeout=10)
    assert time.monotonic() - start < 10
    err = proc.stderr.read()
    if how == "SIGKILL":
        assert rc == -signal.SIGKILL
    else:
        assert rc == 128 + getattr(signal, how)
        assert err.strip().splitlines()[-1] == (
            f"tpscope run: error: stopped by {how}; torchrun and every worker "
            f"were stopped ({out} is marked incomplete)"
        )
    manifest = json.loads((out / "tpscope_run.jsonc").read_text())
    assert (
        manifest["complete"] is False and how.replace("SIGKILL", "SIGTERM") in manifest["stopped"]
    )
    # the traces written before the stop
    assert main(["analyze", str(out), "--json", "--no-cache"]) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("the run did not finish (stopped by" in w for w in warnings), warnings


def _run_with_rendezvous(out: Path, backend: str, port: int, *more: str):
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpscope.cli",
            "run",
            *TINY,
            "--steps",
            "4",
            "--nproc",
            "1",
            "--out",
            str(out),
            "--nnodes",
            "2",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-backend",
            backend,
            *more,
        ],  # fmt: skip
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=120,
    )
    return done, time.monotonic() - started


def test_a_rendezvous_port_taken_by_another_program_is_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done, _ = _run_with_rendezvous(tmp_path / "run", "static", port)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and done.stderr.count("\n") <= 2, done.stderr[-3000:]
    assert last.startswith(f"tpscope run: error: rendezvous at 127.0.0.1:{port}: ") and (
        "address already in use" in last
    ), last
    assert not (tmp_path / "run" / MANIFEST_NAME).exists()  # no run began


def test_a_rendezvous_that_never_answers_gives_up_naming_the_endpoint(tmp_path):
    """A port that accepts connections and never speaks (a firewall's tarpit, another program):
    torchrun alone waits for many minutes; the launcher gives up after --rdzv-timeout-s."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        done, took = _run_with_rendezvous(tmp_path / "run", "c10d", port, "--rdzv-timeout-s", "5")
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"tpscope run: error: rendezvous at 127.0.0.1:{port}: no answer within 5 s "
        "(--rdzv-timeout-s); is every node's launcher started, and is the endpoint reachable "
        "from this node?"
    ), done.stderr[-3000:]
    assert "Traceback" not in done.stderr and took < 60
