"""Flux overlap efficiency and attained saving (docs/metrics.md §9), on hand-made numbers: one
function each, one argument order (fused, unfused, compute[, comm]) for the analyzer and bench."""

from __future__ import annotations

import pytest

from tpscope.runfolder.overlap import attained_saving, flux_overlap_efficiency


def test_flux_overlap_efficiency_by_hand():
    # a step of 1000 µs unfused whose compute is 700: hiding all 300 of comm gives 700
    assert flux_overlap_efficiency(800, 1000, 700) == pytest.approx(1 - 100 / 300)
    assert flux_overlap_efficiency(700, 1000, 700) == pytest.approx(1.0)
    assert flux_overlap_efficiency(1000, 1000, 700) == pytest.approx(0.0)
    assert flux_overlap_efficiency(1100, 1000, 700) == pytest.approx(-1 / 3)  # slower than unfused
    assert flux_overlap_efficiency(800, 700, 700) is None  # nothing to hide
    # an op (ms): GEMM 2.4, collective 2.7, unfused 5.1
    assert flux_overlap_efficiency(3.75, 5.1, 2.4) == pytest.approx(0.5)


def test_attained_saving_by_hand():
    assert attained_saving(800, 1000, 700, 400) == pytest.approx(200 / 300)
    # the limit is comm's 900
    assert attained_saving(800, 1000, 700, 900) == pytest.approx(200 / 100)
    assert attained_saving(2.7, 5.1, 2.4, 2.7) == pytest.approx(1.0)
    assert attained_saving(3.9, 5.1, 2.4, 2.7) == pytest.approx(0.5)
    assert attained_saving(800, 900, 900, 100) is None
