"""metrics.md §8: calibrated isolated GEMM times, stored beside the analysis cache, as baselines."""

from __future__ import annotations

import shutil

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.calibrate.read import calibration_path, read_calibration, write_calibration
from tpscope.errors import UserError
from tpscope.metrics import analyze_run
from tpscope.metrics.gemm import GemmShape
from tpscope.trace import load_run

AG = Collective("_allgather_base", group_size=2)
SHAPE = GemmShape(1, 1024, 4096, 4096, "BFloat16")


def _entry(margin: int, times: list[float]) -> dict:
    return {
        "op": "aten::mm",
        "dims": "[[1024, 4096], [4096, 4096]]",
        "strides": "",
        "types": "",
        "batch": 1,
        "m": 1024,
        "k": 4096,
        "n": 4096,
        "dtype": "BFloat16",
        "sm_margin": margin,
        "times_us": times,
    }


def _fused(tmp_path, dur: float = 140.0):
    """Only overlapped GEMMs (116 CTAs, under an SM margin of 16), none isolated."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.kernel("ncclDevKernel_AllGather", 0, 3 * 150, stream=14, collective=AG)
        for i in range(3):
            r.kernel(
                "nvjet",
                1 + 150.0 * i,
                dur,
                grid=(116, 1, 1),
                input_dims=[[1024, 4096], [4096, 4096]],
                input_type=["c10::BFloat16", "c10::BFloat16"],
            )
        ranks.append(r)
    return load_run(write_run(tmp_path / "fused", ranks, manifest={"sm_margin": 16}))


def test_round_trip_and_place(tmp_path):
    run = _fused(tmp_path).path
    path = calibration_path(run, cache_dir=tmp_path / "cache")
    assert path.parent == tmp_path / "cache" / "calibrations"
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(run, copy)  # a copied folder (other path, other mtimes) keeps its calibration
    assert calibration_path(copy, cache_dir=tmp_path / "cache") == path
    (copy / "tpscope_run.jsonc").write_text("{}")  # not a trace file: no matter
    assert calibration_path(copy, cache_dir=tmp_path / "cache") == path
    other = write_run(tmp_path / "other", [RankTrace(0, world_size=1)])
    assert calibration_path(other, cache_dir=tmp_path / "cache") != path
    (tmp_path / "loop").symlink_to(tmp_path / "loop")  # no folder to read: a path, never an error
    assert calibration_path(tmp_path / "loop", cache_dir=tmp_path / "cache").parent == path.parent
    write_calibration(
        path, tmp_path / "run", "H200", [_entry(0, [100.0, 101.0, 99.0]), _entry(16, [112.0] * 3)]
    )
    samples, device = read_calibration(path)
    assert device == "H200"
    assert sorted(samples[(SHAPE, 0)].tolist()) == [99_000.0, 100_000.0, 101_000.0]
    assert samples[(SHAPE, 16)].tolist() == [112_000.0] * 3


def test_a_broken_calibration_is_one_clear_error(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("{not json")
    with pytest.raises(UserError, match="c.json: not a readable tpscope calibration"):
        read_calibration(path)


def test_calibration_gives_the_baseline_and_the_sm_part(tmp_path):
    """Calibrated: 100 µs on every SM, 112 µs with 16 SMs left free; overlapped: 140 µs. So per GEMM
    40 µs of tax, 12 of them SM part and 28 interference."""
    path = tmp_path / "cal.json"
    write_calibration(path, tmp_path, "H200", [_entry(0, [100.0] * 5), _entry(16, [112.0] * 5)])
    a = analyze_run(_fused(tmp_path), calibration=read_calibration(path)[0])
    (g,) = a.gemm_contention
    assert (g.rule, g.source, g.baseline_us, g.same_sm_us) == (
        "same shape",
        "calibration",
        100.0,
        112.0,
    )
    b = a.gemm_budget
    assert (b.tax_us, b.sm_us, b.interference_us) == pytest.approx((120.0, 36.0, 84.0))
    assert a.summary.contention_coverage == pytest.approx(1.0)


def test_without_calibration_the_fused_run_has_no_baseline(tmp_path):
    a = analyze_run(_fused(tmp_path))
    assert a.summary.contention_coverage == 0.0 and a.gemm_contention[0].rule == "none"


def test_calibrated_sm_ratio_scales_the_runs_own_baseline(tmp_path):
    """The run's own isolated GEMMs take 100 µs on every SM; the calibration measures 90 µs at margin 0
    and 108 µs at margin 16 (20% more). The same-SM time is 100 x 1.2 = 120 µs, not the calibration's
    own 108: its clock never mixes with the trace's kernel durations."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        for i in range(3):
            r.kernel(
                "nvjet",
                200.0 * i,
                100,
                grid=(132, 1, 1),
                input_dims=[[1024, 4096], [4096, 4096]],
                input_type=["c10::BFloat16", "c10::BFloat16"],
            )
        r.kernel("ncclDevKernel_AllGather", 1000, 3 * 150, stream=14, collective=AG)
        for i in range(3):
            r.kernel(
                "nvjet",
                1001 + 150.0 * i,
                140,
                grid=(116, 1, 1),
                input_dims=[[1024, 4096], [4096, 4096]],
                input_type=["c10::BFloat16", "c10::BFloat16"],
            )
        ranks.append(r)
    run = load_run(write_run(tmp_path / "run", ranks, manifest={"sm_margin": 16}))
    path = tmp_path / "cal.json"
    write_calibration(path, tmp_path, "H200", [_entry(0, [90.0] * 3), _entry(16, [108.0] * 3)])
    a = analyze_run(run, calibration=read_calibration(path)[0])
    (g,) = a.gemm_contention
    assert (g.source, g.baseline_us, g.same_sm_us) == ("run", 100.0, pytest.approx(120.0))
    b = a.gemm_budget
    assert (b.tax_us, b.sm_us, b.interference_us) == pytest.approx((120.0, 60.0, 60.0))
    assert analyze_run(run).gemm_budget.unsplit_us == pytest.approx(120.0)  # without it: not split
