"""`tpscope calibrate`: the run's GEMM calls replayed alone (here on the CPU), stored where `analyze`
finds them, and used there."""

from __future__ import annotations

import json

import pytest
import torch

from tests.kineto import Collective, RankTrace, write_run
from tpscope.calibrate.calibrate_command import run_margins
from tpscope.calibrate.replay import operands
from tpscope.cli import main
from tpscope.metrics.calibration import calibration_path
from tpscope.metrics.gemm import GemmCall, parse_shape
from tpscope.report.analyze_command import analyze_folder

AG = Collective("_allgather_base", group_size=2)
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
    assert main(["calibrate", str(run), "--device", "cpu", "--samples", "3", "--per-sample", "2"]) == 0
    doc = json.loads(calibration_path(run).read_text())
    got = sorted((e["m"], e["k"], e["n"], e["sm_margin"], len(e["times_us"])) for e in doc["entries"])
    assert got == [(16, 64, 32, 0, 3), (16, 64, 32, 8, 3), (64, 32, 16, 0, 3), (64, 32, 16, 8, 3)]
    assert all(t > 0 for e in doc["entries"] for t in e["times_us"])
    assert not any(p.name.startswith("cal") for p in run.iterdir())  # nothing written into the run
    a = analyze_folder(run, None, workers=1, use_cache=True)
    assert {(g.rule, g.source) for g in a.gemm_contention} == {("same shape", "calibration")}
    assert a.summary.contention_coverage == pytest.approx(1.0)


def test_operands_keep_the_recorded_layout():
    call = GemmCall("aten::mm", "[[16, 64], [64, 32]]", "[[64, 1], [1, 64]]", json.dumps(BF),
                    parse_shape("aten::mm", "[[16, 64], [64, 32]]", json.dumps(BF)))
    a, b = operands(call, torch.device("cpu"))
    assert (a.shape, a.stride(), b.shape, b.stride()) == ((16, 64), (64, 1), (64, 32), (1, 64))
    assert a.dtype == b.dtype == torch.bfloat16


def test_margins_from_the_manifest():
    assert run_margins(None) == [0]
    assert run_margins({"sm_margin": 0, "fusion_by_layer": {"a": {"sm_margin": 16}, "b": {"sm_margin": 8}}}) == [0, 8, 16]


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
