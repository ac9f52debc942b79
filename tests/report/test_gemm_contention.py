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


def _ranks(isolated: bool, overlapped: bool, n: int = 5) -> list[RankTrace]:
    """Per rank: `n` isolated 100 µs GEMMs, then `n` of 150 µs under a layer's all-gather (two
    ranks: 2n of each, at the floor of 10 from n = 5)."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        if isolated:
            for i in range(n):
                r.kernel("nvjet", 200.0 * i, 100, input_dims=DIMS, input_type=BF)
        if overlapped:
            r.kernel("ncclDevKernel_AllGather", 2000, n * 200, stream=14, collective=AG)
            r.cpu_annotation("tpscope/blk.fc1/ag_gemm", 1980, n * 200 + 100)
            for i in range(n):
                r.kernel("nvjet", 2001 + 200.0 * i, 150, input_dims=DIMS, input_type=BF)
        ranks.append(r)
    return ranks


def test_view_figures(tmp_path):
    a = analyze_run(load_run(write_run(tmp_path / "run", _ranks(True, True))))
    view = gemm_view(a)
    lines = budget_lines(view)
    # per rank and step: 5 x 100 + 5 x 150 = 1,250 µs = 1,000 alone + 250 tax + 0 without + 0 unexplained
    assert lines[0].startswith(
        "GEMM time per rank and step: 1,250 µs = 1,000 alone (baselines) + 250 tax"
    )
    assert "Coverage: 100.0% of the overlapped GEMM time (750 µs)" in lines[1]
    _, rows = shape_rows(view)
    assert rows == [
        ["1024×4096×4096 BFloat16", "10", "same shape (run)", "100", "100", "150", "+50.0%", "250"]
    ]
    _, rows = part_rows(view.layers, "layer/op")
    assert rows == [["blk.fc1/ag_gemm", "750", "500", "250", "0", "250"]]
    text = render(a)
    assert "GEMM contention by shape" in text
    assert "at least 10 GEMMs alone" in text  # the table states its floor


def test_a_shape_under_the_floor_is_left_out_of_the_table_not_of_the_budget(tmp_path):
    """Three GEMMs of each kind per rank: 6 alone and 6 beside a transfer, under the floor of 10."""
    a = analyze_run(load_run(write_run(tmp_path / "run", _ranks(True, True, n=3))))
    view = gemm_view(a)
    assert view.shapes == ()
    # the budget still counts them: 3 x 100 + 3 x 150 = 750 µs per rank and step
    assert budget_lines(view)[0].startswith(
        "GEMM time per rank and step: 750 µs = 600 alone (baselines) + 150 tax"
    )
    # and 150 µs medians 1.5 µs apart are under the floor too, however many
    b = analyze_run(load_run(write_run(tmp_path / "close", _close_ranks())))
    assert gemm_view(b).shapes == ()


def _close_ranks() -> list[RankTrace]:
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        for i in range(6):
            r.kernel("nvjet", 200.0 * i, 100, input_dims=DIMS, input_type=BF)
        r.kernel("ncclDevKernel_AllGather", 2000, 1200, stream=14, collective=AG)
        for i in range(6):
            r.kernel("nvjet", 2001 + 200.0 * i, 101.5, input_dims=DIMS, input_type=BF)
        ranks.append(r)
    return ranks


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
