"""`tpscope run --device cpu` end to end: a complete run folder (per-rank gzip Kineto traces with
distributedInfo.rank and ProfilerStep# annotations, tpscope/ labels, a manifest), the out-folder
rule, and joining a torchrun that the user started. The traces are read here as plain JSON."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fusion._cli import REPO, TINY_MODEL, tpscope

SMALL = [
    "--device",
    "cpu",
    "--steps",
    "4",
    "--profile-steps",
    "1",
    *TINY_MODEL,
    "--timeout-s",
    "60",
]


def _check_run_folder(out: Path, world: int, mode: str) -> dict:
    traces = sorted(out.glob("rank*.pt.trace.json.gz"))
    assert len(traces) == world, list(out.iterdir())
    ranks = set()
    for path in traces:
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh)
        ranks.add(doc["distributedInfo"]["rank"])
        assert doc["distributedInfo"]["world_size"] == world
        names = {e.get("name", "") for e in doc["traceEvents"]}
        assert any(n.startswith("ProfilerStep#") for n in names)
        assert (
            "tpscope/block0.mlp.fc1/ag_gemm" in names and "tpscope/block0.mlp.fc2/gemm_rs" in names
        )
        if mode == "chunked":
            assert "tpscope/block0.mlp.fc1/ag_gemm/chunk1" in names
        shapes = [
            e
            for e in doc["traceEvents"]
            if e.get("name", "").startswith("gloo:") and "Input Dims" in e.get("args", {})
        ]
        assert shapes, "collectives carry their shapes (record_shapes)"
    assert ranks == set(range(world))
    manifest = json.loads((out / "tpscope_run.jsonc").read_text())
    assert manifest["tp"] == world and manifest["mode"] == mode and manifest["device"] == "cpu"
    assert len(manifest["step_times_ms"]) == 4 and manifest["tokens_per_s"] > 0
    assert manifest["profiler"]["profiled_steps"] == [2]
    assert manifest["nccl_env"]["NCCL_NVLS_ENABLE"] == "0"
    return manifest


def test_run_writes_a_complete_folder_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "run"
    done = tpscope(
        "run",
        "--nproc",
        "2",
        "--mode",
        "chunked",
        "--chunks",
        "2",
        "--regime",
        "shm",
        "--out",
        str(out),
        *SMALL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 4/4" in done.stdout
    assert (
        "tpscope run: loss " in done.stdout
        and "(mean of the first and last 1 steps)" in done.stdout
    )
    manifest = _check_run_folder(out, 2, "chunked")
    assert manifest["regime"] == "shm" and manifest["regime_env"] == {"NCCL_P2P_DISABLE": "1"}
    trend, losses = manifest["loss_trend"], manifest["losses"]
    assert trend["window_steps"] == 1 and (trend["first_mean"], trend["last_mean"]) == (
        losses[0],
        losses[-1],
    )
    analyzed = tpscope("analyze", str(out), "--json")  # the analyzer reads it (a separate process)
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    assert json.loads(analyzed.stdout)["ranks"] == [0, 1]
    again = tpscope("run", "--nproc", "2", "--out", str(out), *SMALL)
    assert again.returncode == 2
    assert again.stderr.strip().count("\n") == 0 and "--overwrite" in again.stderr


def test_user_mistakes_exit_2_with_one_line(tmp_path):
    for args in (
        ["--mode", "symm_mem"],
        ["--nproc", "3"],
        ["--chunks", "3"],
        ["--warmup-steps", "5"],
        ["--grad-clip", "-1"],
    ):
        done = tpscope("run", "--out", str(tmp_path / "x"), *SMALL, *args)
        assert done.returncode == 2, (args, done.stderr[-2000:])
        assert done.stderr.strip().count("\n") == 0, done.stderr


@pytest.mark.slow
def test_run_joins_a_torchrun_started_by_the_user(tmp_path):
    out = tmp_path / "joined"
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "tpscope.cli",
    ]
    done = tpscope("run", "--mode", "ring", "--out", str(out), *SMALL, launcher=launcher)
    assert done.returncode == 0, done.stderr[-3000:]
    _check_run_folder(out, 2, "ring")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_launchers_write_one_run_folder_with_every_rank(tmp_path):
    """Two "nodes" on this machine, one launcher each, meeting at one rendezvous on 127.0.0.1:
    one run folder with both ranks, as torchrun's multi-node launch gives (docs/runtime.md)."""
    out = tmp_path / "two-nodes"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    node = [
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        f"127.0.0.1:{_free_port()}",
        "--rdzv-backend",
        "c10d",
        "--rdzv-id",
        "two-nodes",
        "--nproc",
        "1",
        "--out",
        str(out),
        *SMALL,
    ]
    cmd = [sys.executable, "-m", "tpscope.cli", "run"]
    procs = [
        subprocess.Popen(
            cmd + ["--node-rank", str(k)] + node,
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (0, 1)
    ]
    outputs = [p.communicate(timeout=150) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outputs]
    manifest = _check_run_folder(out, 2, "chunked")
    assert manifest["regime"] == "gloo"  # a CPU run: no NCCL regime
    assert "UserWarning" not in "".join(e for _, e in outputs)


def test_multi_node_options_are_checked_before_any_process_starts(tmp_path):
    for args, words in (
        (["--nnodes", "2"], "--rdzv-endpoint"),
        (["--nnodes", "two"], "--nnodes two"),
        (["--node-rank", "-1"], "--node-rank"),
        (["--node-rank", "1"], "--node-rank 1: the job has 1 node"),
        (["--nnodes", "2:1", "--rdzv-endpoint", "127.0.0.1:1"], "--nnodes 2:1: MIN is larger"),
    ):
        done = tpscope("run", "--out", str(tmp_path / "x"), *SMALL, *args)
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr[-2000:])
        assert done.stderr.strip().count("\n") == 0, done.stderr


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--chunks", "0", "--chunks must be >= 1, not 0"),
        ("--timeout-s", "nan", "--timeout-s must be a finite number > 0, not nan"),
        ("--lr", "-1", "--lr must be a finite number > 0, not -1.0"),
        # 2 blocks of H=65536, F=262144, vocab 512, float32: 4 copies of 4 bytes per parameter
        (
            "--hidden",
            "65536",
            f"needs at least {(2 * 512 * 65536 + 2 * (4 * 65536**2 + 2 * 65536 * 262144 + 2 * 65536) + 65536) * 16 / 2**30:.1f} GiB",
        ),
    ],
)
def test_senseless_options_are_refused_not_replaced(tmp_path, capsys, option, value, words):
    from tpscope.cli import main

    args = [
        "run",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "run"),
        "--heads",
        "4",
        "--ffn",
        "262144",
    ]
    assert main([*args, option, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "run").exists()  # refused before any process or folder


def test_a_model_larger_than_memory_is_one_line_per_rank_and_exit_2(tmp_path):
    """The workers run out of memory (an address space of 4 GB for the whole process tree):
    each rank says so in one line, no traceback, exit 2."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4_000_000_000, 4_000_000_000))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpscope.cli",
            "run",
            "--device",
            "cpu",
            "--vocab",
            "500000",
            "--hidden",
            "512",
            "--heads",
            "4",
            "--ffn",
            "512",
            "--layers",
            "1",
            "--steps",
            "2",
            "--profile-steps",
            "0",
            "--seq-len",
            "16",
            "--batch",
            "2",
            "--out",
            str(tmp_path / "r"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        cwd=REPO,
        preexec_fn=limit,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and all(
        "out of memory" in line and line.startswith("tpscope run: error: rank ") for line in lines
    ), lines


def test_every_option_default_is_run_configs():
    """No option restates a default: `tpscope run` with no option is RunConfig's defaults (on a
    GPU; on CPU the dtype is float32), and the chunk count follows the mode."""
    import argparse

    from tpscope.fusion.run.command import add_arguments, config_from_args
    from tpscope.fusion.run.config import RunConfig

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert config_from_args(parser.parse_args([]), "cuda", "out") == RunConfig(out_dir="out")
    assert config_from_args(parser.parse_args([]), "cpu", "out") == RunConfig(
        out_dir="out", device="cpu", dtype="float32"
    )
    for mode, chunks in (("chunked", 4), ("auto", 1), ("ring", 1), ("copy_engine", 1), ("none", 1)):
        assert (
            config_from_args(parser.parse_args(["--mode", mode]), "cuda", "o").fusion.chunks
            == chunks
        )
    no_profiler = config_from_args(parser.parse_args(["--profile-steps", "0"]), "cuda", "o")
    assert (no_profiler.profile_wait, no_profiler.profile_warmup, no_profiler.profile_active) == (
        0,
        0,
        0,
    )
