"""`tpscope whatif`'s tables (metrics.md §11) on the hand-built two-rank trace of
tests/metrics/test_replay.py, whose numbers are known by hand."""

from __future__ import annotations

import re

from tests.kineto import RankTrace, write_run
from tests.metrics.test_replay import _two_ranks
from tpscope.metrics.whatif import predict, prepare
from tpscope.metrics.whatif_changes import parse_change
from tpscope.report.whatif_terminal import render
from tpscope.trace import load_run


def _row(text: str, first: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(first))
    return re.split(r"\s{2,}", line.strip())


def test_rows_give_step_speedup_and_exposed_comm_measured_and_predicted(tmp_path):
    """Measured: a 400 µs step, rank 0's all-gather [100, 300] exposed 200 µs (the most of any
    rank). comm=0.5: 325 µs (1.231x), 125 µs exposed. hide=all: 250 µs (1.600x); what stays
    exposed is rank 0's wait [100, 150] for rank 1: 50 µs."""
    inp = prepare(load_run(write_run(tmp_path / "run", _two_ranks())))
    text = render(predict(inp, [parse_change("comm=0.5"), parse_change("hide=all")]))
    measured = _row(text, "(measured)")
    assert measured[1:5] == ["400", "400.0", "1.000x", "-"]
    assert measured[5] == "200.0"
    assert _row(text, "comm=0.5 ")[1:6] == ["325", "325.0", "1.231x", "-", "125.0"]
    assert _row(text, "hide=all ")[1:6] == ["250", "250.0", "1.600x", "-", "50.0"]
    assert _row(text, "comm=0.5 hide=all")[2:4] == ["250.0", "1.600x"]


def test_an_unexplained_gap_is_named_with_the_activity_it_delayed(tmp_path):
    """A comm kernel [0, 100], then `late` launched at 50 that starts at 600 on its idle stream:
    500 µs no edge explains, before `late`."""
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -10, 1000)
    r.kernel("ncclDevKernel_AllGather", 0, 100, launch_us=(-5, 1))
    r.kernel("late", 600, 100, launch_us=(50, 1))
    text = render(predict(prepare(load_run(write_run(tmp_path / "run", [r]))), []))
    assert "unexplained 500.0" in text
    assert "  unexplained: most before late 500.0 µs" in text


def test_a_poor_fit_is_said_to_be_one(tmp_path):
    """A kind whose residual is above 50% is named under the fit's table; one below is not."""
    import dataclasses

    from tpscope.metrics.whatif_changes import AlphaBeta

    inp = prepare(load_run(write_run(tmp_path / "run", _two_ranks())))
    w = predict(inp, [])
    fits = [
        AlphaBeta("all_gather", 0.0, 20.0, 12, 0.8),
        AlphaBeta("all_reduce", 0.0, 20.0, 9, 0.45),
    ]
    text = render(dataclasses.replace(w, alpha_beta=fits))
    assert "\nall_gather: residual above 50%: these transfers do not follow" in text
    assert "all_reduce: residual" not in text
