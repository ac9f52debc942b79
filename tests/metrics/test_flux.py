"""Flux overlap efficiency and attained saving (docs/metrics.md §9), on hand-made numbers: one
function each, one argument order (fused, unfused, compute[, comm]) for the analyzer and bench."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tpscope.metrics.flux import attained_saving, flux_overlap_efficiency

ROOT = Path(__file__).resolve().parents[2]


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


def test_bench_reads_the_formulas_without_the_analyzers_libraries():
    """`tpscope bench` runs where msgspec, isal, pandas, dash and HTA are not installed."""
    code = (
        "import sys\n"
        "for m in ('msgspec', 'isal', 'pandas', 'dash', 'plotly', 'hta'): sys.modules[m] = None\n"
        "import tpscope.fusion.tuning.bench\n"
        "print(sorted(m for m in sys.modules if m.startswith(('tpscope.metrics', 'tpscope.trace'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["['tpscope.metrics',", "'tpscope.metrics.flux']"]
