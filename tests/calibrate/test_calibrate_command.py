"""`tpscope calibrate`: the run's GEMM calls replayed alone (here on the CPU), stored where `analyze`
finds them, and used there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.kineto import Collective, RankTrace, write_run
from tpscope.calibrate.calibrate_command import run_margins
from tpscope.calibrate.read import calibration_path
from tpscope.calibrate.replay import operands
from tpscope.cli import main
from tpscope.metrics.gemm import GemmCall, parse_shape
from tpscope.report.analyze_command import analyze_folder
from tpscope.runfolder.manifest import Manifest

AG = Collective("_allgather_base", group_size=2)
REPO = Path(__file__).resolve().parent.parent.parent
BF = ["c10::BFloat16", "c10::BFloat16"]


def _run(tmp_path):
    """Overlapped GEMMs of two shapes (one with B transposed), none isolated; SM margin 8."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.kernel("ncclDevKernel_AllGather", 0, 1000, stream=14, collective=AG)
        for i in range(3):
            r.kernel("nvjet", 1 + 300.0 * i, 100, input_dims=[[64, 32], [32, 16]], input_type=BF)
        r.kernel("nvjet", 950, 100, input_dims=[[16, 64], [64, 32]], input_type=BF)
        r.events[-2]["args"]["Input Strides"] = [[64, 1], [1, 64]]  # B column-major
        ranks.append(r)
    return write_run(tmp_path / "run", ranks, manifest={"sm_margin": 8})


def test_calibrate_replays_every_call_at_every_margin(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = _run(tmp_path)
    assert (
        main(["calibrate", str(run), "--device", "cpu", "--samples", "3", "--per-sample", "2"]) == 0
    )
    doc = json.loads(calibration_path(run).read_text())
    got = sorted(
        (e["m"], e["k"], e["n"], e["sm_margin"], len(e["times_us"])) for e in doc["entries"]
    )
    assert got == [(16, 64, 32, 0, 3), (16, 64, 32, 8, 3), (64, 32, 16, 0, 3), (64, 32, 16, 8, 3)]
    assert all(t > 0 for e in doc["entries"] for t in e["times_us"])
    assert not any(p.name.startswith("cal") for p in run.iterdir())  # nothing written into the run
    a = analyze_folder(run, None, workers=1, use_cache=True)
    assert {(g.rule, g.source) for g in a.gemm_contention} == {("same shape", "calibration")}
    assert a.summary.contention_coverage == pytest.approx(1.0)


def test_operands_keep_the_recorded_layout():
    call = GemmCall(
        "aten::mm",
        "[[16, 64], [64, 32]]",
        "[[64, 1], [1, 64]]",
        json.dumps(BF),
        parse_shape("aten::mm", "[[16, 64], [64, 32]]", json.dumps(BF)),
    )
    a, b = operands(call, torch.device("cpu"))
    assert (a.shape, a.stride(), b.shape, b.stride()) == ((16, 64), (64, 1), (64, 32), (1, 64))
    assert a.dtype == b.dtype == torch.bfloat16


def test_margins_from_the_manifest():
    assert run_margins(None) == [0]
    assert run_margins(
        Manifest(sm_margin=0, fusion_by_layer={"a": {"sm_margin": 16}, "b": {"sm_margin": 8}})
    ) == [0, 8, 16]


def test_a_run_without_gemm_shapes_is_one_clear_error(tmp_path, capsys):
    r = RankTrace(0, world_size=1)
    r.kernel("nvjet", 0, 100)
    run = write_run(tmp_path / "plain", [r])
    assert main(["calibrate", str(run), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GEMM op with Input Dims" in err[0] and str(run) in err[0]


def test_no_gpu_is_one_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["calibrate", str(_run(tmp_path)), "--device", "cuda"]) == 2
    assert "no CUDA GPU here" in capsys.readouterr().err


def test_a_plan_written_here_is_replayed_there(tmp_path, monkeypatch, capsys):
    """--plan-out reads the calls (no GPU); --plan replays them and files the calibration under the
    run's key, where `analyze` of the run folder finds it."""
    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = _run(tmp_path)
    plan = tmp_path / "plan.json"
    assert main(["calibrate", str(run), "--plan-out", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    assert doc["margins"] == [0, 8] and len(doc["calls"]) == 2
    assert not calibration_path(run).exists()  # nothing replayed yet
    assert (
        main(
            [
                "calibrate",
                "--plan",
                str(plan),
                "--device",
                "cpu",
                "--samples",
                "3",
                "--per-sample",
                "1",
            ]
        )
        == 0
    )
    entries = json.loads(calibration_path(run).read_text())["entries"]
    assert sorted((e["m"], e["sm_margin"]) for e in entries) == [(16, 0), (16, 8), (64, 0), (64, 8)]


def test_the_replay_needs_none_of_the_analyzers_libraries(tmp_path, monkeypatch):
    """On the GPU machine there is no msgspec (nor dash, plotly, HTA): --plan must work without it."""
    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = _run(tmp_path)
    plan = tmp_path / "plan.json"
    assert main(["calibrate", str(run), "--plan-out", str(plan)]) == 0
    code = (
        "import sys\n"
        "for m in ('msgspec', 'isal', 'dash', 'plotly', 'hta', 'pandas'): sys.modules[m] = None\n"
        "from tpscope.cli import main\n"
        f"rc = main(['calibrate', '--plan', {str(plan)!r}, '--device', 'cpu', '--samples', '2'])\n"
        "assert 'tpscope.trace' not in sys.modules and 'tpscope.metrics' not in sys.modules\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert calibration_path(run).exists()


def test_plan_and_run_dir_misuse_is_one_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for argv, words in (
        (["calibrate"], "give a RUN_DIR or --plan FILE"),
        (["calibrate", "--plan", str(bad)], "not a plan written by"),
        (["calibrate", str(tmp_path), "--plan", str(bad)], "give a RUN_DIR or --plan FILE"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


@pytest.mark.parametrize("run", ["shm-chunked", "shm-auto", "nvlink-ring", "nvlink-copy_engine"])
def test_the_gpu_scripts_plans_are_the_sample_runs_calls(run):
    """The `calibrate` recipe (benchmarks/recipes.py) replays benchmarks/calibrate_plans/: they must be what --plan-out
    writes for the sample runs today (the same calls, margins and key)."""
    from tpscope.calibrate.calibrate_command import run_plan

    folder = Path("sample_traces") / f"h200x2-{run}"
    committed = json.loads(
        (REPO / "benchmarks" / "calibrate_plans" / f"h200x2-{run}.json").read_text()
    )
    assert committed == json.loads(json.dumps(run_plan(REPO / folder) | {"run_dir": str(folder)}))


def _plan(tmp_path, **changes) -> Path:
    """A valid plan of one small GEMM call, with `changes` applied."""
    doc = {
        "version": 1,
        "run_dir": "runs/x",
        "key": "0123456789abcdef0123456789abcdef",
        "margins": [0],
        "calls": [
            {"op": "aten::mm", "dims": "[[4, 8], [8, 2]]", "strides": "", "types": json.dumps(BF)}
        ],
    } | changes
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_plan_key_that_is_a_path_is_refused(tmp_path, monkeypatch, capsys):
    """The key names a file in the cache: one from elsewhere must never reach outside it."""
    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "tpscope_run.json").write_text("{}")
    key = os.path.relpath(victim / "tpscope_run", tmp_path / "cache" / "calibrations")
    for bad in (key, "/tmp/x", "a/b", "", "..", "x" * 300):
        plan = _plan(tmp_path, key=bad)
        argv = ["calibrate", "--plan", str(plan), "--device", "cpu", "--samples", "1"]
        assert main(argv) == 2, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(plan) in err[0] and "key" in err[0], err
    assert (victim / "tpscope_run.json").read_text() == "{}"
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))


def test_a_plan_with_huge_dims_is_one_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    for dims in (
        "[[1000000, 100000], [100000, 2]]",  # 200 GB of bf16: past this machine, refused by the OS
        "[[10000000, 10000000], [10000000, 2]]",
        "[[4611686018427387904, 4], [4, 2]]",
        "[[1180591620717411303424, 2], [2, 2]]",
    ):
        plan = _plan(tmp_path)
        doc = json.loads(plan.read_text())
        doc["calls"][0]["dims"] = dims
        plan.write_text(json.dumps(doc))
        assert main(["calibrate", "--plan", str(plan), "--device", "cpu", "--samples", "1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(plan) in err[0], err


def test_a_plans_run_dir_and_dtype_reach_the_terminal_inert(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    plan = _plan(tmp_path, run_dir="runs/\x1b]0;pwned\x07\x1b[2J")
    assert main(["calibrate", "--plan", str(plan), "--device", "cpu", "--samples", "1"]) == 0
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert "\\x1b]0;pwned" in out.out
