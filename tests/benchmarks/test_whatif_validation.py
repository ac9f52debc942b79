"""docs/metrics.md §11's validation table: each fused sample run predicted from its regime's
unfused run, against the step time measured in its own trace (§3's step time, an independent
computation), and shm-none from nvlink-none through the shm link's α-β fit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from whatif_validation import fused_rows, link_row, order_ok  # noqa: E402


@pytest.fixture(scope="module")
def loo():
    return fused_rows("loo")


def test_every_fused_run_within_5_percent_mean_within_3(loo):
    """Contention, chunk-transfer fit and chunk GEMMs from the other fused run of the regime
    whose transfers are of the same kind (else assumed): never from the predicted run."""
    assert len(loo) == 5
    for r in loo:
        assert abs(r["error"]) <= 0.05, (r["regime"], r["mode"], r["error"])
    assert sum(abs(r["error"]) for r in loo) / len(loo) <= 0.03


@pytest.mark.parametrize("regime", ["nvlink", "shm"])
def test_modes_ranked_in_the_measured_order(loo, regime):
    assert order_ok(loo, regime)


def test_assumed_contention_alone(loo):
    """With the slowdown assumed (no fused run used): within 5% on nvlink; on shm the assumed
    10% is below what each fused run of the regime measures, so each prediction is too fast."""
    measured = [r["slowdown"] for r in loo if r["regime"] == "shm"]
    assert min(measured) > 0.10
    for r in fused_rows("assumed"):
        if r["regime"] == "nvlink":
            assert abs(r["error"]) <= 0.05, (r["mode"], r["error"])
        else:
            assert r["error"] < 0, (r["mode"], r["error"])


def test_shm_unfused_from_nvlink_unfused_within_10_percent():
    r = link_row()
    assert abs(r["error"]) <= 0.10
