"""The GEMM contention view of `analyze` and of the report (metrics.md §8), on traces built with
known durations."""

from __future__ import annotations

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.report.compare import parse_fail_on
from tpscope.report.gemm_contention import budget_lines, gemm_view, part_rows, shape_rows
from tpscope.report.report_command import build
from tpscope.report.terminal import render
from tpscope.trace import load_run

AG = Collective("_allgather_base", group_size=2)
DIMS = [[1024, 4096], [4096, 4096]]
BF = ["c10::BFloat16", "c10::BFloat16"]


def _ranks(isolated: bool, overlapped: bool) -> list[RankTrace]:
    """Per rank: three isolated 100 µs GEMMs, then three of 150 µs under a layer's all-gather."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        if isolated:
            for i in range(3):
                r.kernel("nvjet", 200.0 * i, 100, input_dims=DIMS, input_type=BF)
        if overlapped:
            r.kernel("ncclDevKernel_AllGather", 1000, 3 * 200, stream=14, collective=AG)
            r.cpu_annotation("tpscope/blk.fc1/ag_gemm", 980, 700)
            for i in range(3):
                r.kernel("nvjet", 1001 + 200.0 * i, 150, input_dims=DIMS, input_type=BF)
        ranks.append(r)
    return ranks


def test_view_figures(tmp_path):
    a = analyze_run(load_run(write_run(tmp_path / "run", _ranks(True, True))))
    view = gemm_view(a)
    lines = budget_lines(view)
    # per rank and step: 3 x 100 + 3 x 150 = 750 µs = 600 alone + 150 tax + 0 without + 0 unexplained
    assert lines[0].startswith(
        "GEMM time per rank and step: 750 µs = 600 alone (baselines) + 150 tax"
    )
    assert "Coverage: 100.0% of the overlapped GEMM time (450 µs)" in lines[1]
    _, rows = shape_rows(view)
    assert rows == [
        ["1024×4096×4096 BFloat16", "6", "same shape (run)", "100", "100", "150", "+50.0%", "150"]
    ]
    _, rows = part_rows(view.layers, "layer/op")
    assert rows == [["blk.fc1/ag_gemm", "450", "300", "150", "0", "150"]]
    assert "GEMM contention by shape" in render(a)


def test_no_view_without_overlapped_gemms(tmp_path):
    a = analyze_run(load_run(write_run(tmp_path / "run", _ranks(True, False))))
    assert gemm_view(a) is None and "GEMM contention by shape" not in render(a)


def test_the_report_takes_baselines_from_its_baseline_run(tmp_path):
    """The candidate has no isolated GEMM; the baseline run has them: the report's view covers all."""
    cand = write_run(tmp_path / "cand", _ranks(False, True))
    base = write_run(tmp_path / "base", _ranks(True, False))
    report = build(str(cand), str(base), fail_on=parse_fail_on(None))
    assert report.gemm.budget.coverage == 1.0
    assert report.gemm.shapes[0].source == "reference"
    alone = build(str(cand), None, fail_on=parse_fail_on(None))
    assert alone.gemm.budget.coverage == 0.0
