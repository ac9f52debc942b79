"""Summary statistics and the two overlap figures of BENCHMARKS.md, on hand-made numbers."""

from __future__ import annotations

import pytest

from tpscope.fusion.timing import attained_saving, overlap_efficiency, summarize


def test_summarize():
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (t.median_ms, t.min_ms, t.max_ms, t.reps) == (3.0, 1.0, 5.0, 5)
    assert t.p10_ms == 1.0 and t.p90_ms == 5.0


def test_overlap_efficiency_and_attained_saving():
    # GEMM 2.4, collective 2.7, unfused 5.1: hiding all comm behind the GEMM would give 2.7
    assert overlap_efficiency(2.4, 2.4, 5.1) == pytest.approx(1.0)
    assert overlap_efficiency(5.1, 2.4, 5.1) == pytest.approx(0.0)
    assert overlap_efficiency(3.75, 2.4, 5.1) == pytest.approx(0.5)
    assert attained_saving(2.7, 5.1, 2.4, 2.7) == pytest.approx(1.0)
    assert attained_saving(3.9, 5.1, 2.4, 2.7) == pytest.approx(0.5)
    assert overlap_efficiency(1.0, 2.0, 2.0) is None
    assert attained_saving(1.0, 2.0, 2.0, 1.0) is None
