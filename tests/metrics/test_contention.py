"""metrics.md §8: kernels slowed by communication beside them, and collectives slowed by compute."""

from __future__ import annotations

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.trace import load_run

FACTOR = 1.3  # GEMMs that overlap a collective take 30% longer
AG = Collective("_allgather_base", group_size=2)


def _rank(rank: int, isolated: bool = True, overlapped: bool = True) -> RankTrace:
    """Four isolated 100 µs GEMMs, then four GEMMs of 130 µs each under one long all-gather."""
    r = RankTrace(rank)
    t = 0.0
    if isolated:
        for _ in range(4):
            r.kernel("gemm", t, 100, grid=(132, 1, 1))
            t += 110
    if overlapped:
        r.kernel("ncclDevKernel_AllGather", t, 4 * 140, stream=14, collective=AG)
        for _ in range(4):
            r.kernel("gemm", t + 2, 100 * FACTOR, grid=(132, 1, 1))
            t += 140
    return r


def test_known_gemm_inflation_is_recovered(tmp_path):
    a = analyze_run(load_run(write_run(tmp_path / "run", [_rank(0), _rank(1)])))
    (gemm,) = [k for k in a.kernel_contention if k.signature.startswith("gemm|")]
    assert (gemm.n_isolated, gemm.n_overlapped) == (8, 8)
    assert gemm.slowdown == pytest.approx(FACTOR - 1)
    assert gemm.baseline == "own"
    for s in a.steps:  # tax: 4 x 30 µs over a baseline of 4 x 100 µs
        assert s.contention_tax_us == pytest.approx(4 * 30.0)
        assert s.contention_slowdown == pytest.approx(0.3)
    assert a.summary.contention_slowdown == pytest.approx(0.3)
    assert a.summary.contention_coverage == pytest.approx(1.0)  # every overlapped GEMM has a baseline


def test_coverage_is_the_overlapped_compute_time_that_has_a_baseline(tmp_path):
    """Besides the four 130 µs GEMMs with a baseline, two 200 µs kernels of a signature never seen
    alone run under the all-gather: coverage = 4 x 130 / (4 x 130 + 2 x 200)."""
    ranks = []
    for rank in (0, 1):
        r = _rank(rank)
        r.kernel("ncclDevKernel_AllGather", 2000, 500, stream=14, collective=AG)
        r.kernel("gemm_under_margin", 2010, 200, grid=(116, 1, 1))
        r.kernel("gemm_under_margin", 2220, 200, grid=(116, 1, 1))
        ranks.append(r)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    assert a.summary.contention_coverage == pytest.approx(4 * 130 / (4 * 130 + 2 * 200))
    assert a.summary.contention_slowdown == pytest.approx(0.3)  # the slowdown speaks for the covered part


def test_without_isolated_instances_nothing_is_made_up(tmp_path):
    a = analyze_run(load_run(write_run(tmp_path / "run", [_rank(0, isolated=False), _rank(1, isolated=False)])))
    (gemm,) = [k for k in a.kernel_contention if k.signature.startswith("gemm|")]
    assert gemm.slowdown is None and gemm.baseline is None
    assert all(s.contention_tax_us is None and s.contention_slowdown is None for s in a.steps)
    assert a.summary.contention_slowdown is None
    assert a.summary.contention_coverage == 0.0  # overlapped compute, none of it with a baseline


def test_reference_run_supplies_the_isolated_baseline(tmp_path):
    fused = load_run(write_run(tmp_path / "fused", [_rank(0, isolated=False), _rank(1, isolated=False)]))
    base = load_run(write_run(tmp_path / "base", [_rank(0, overlapped=False), _rank(1, overlapped=False)]))
    a = analyze_run(fused, reference=base)
    (gemm,) = [k for k in a.kernel_contention if k.signature.startswith("gemm|")]
    assert gemm.baseline == "reference"
    assert gemm.slowdown == pytest.approx(FACTOR - 1)
    assert a.summary.contention_slowdown == pytest.approx(0.3)


def test_collective_transfer_beside_compute_versus_isolated(tmp_path):
    """Three isolated all-gathers of 100 µs, three of 150 µs under a GEMM: slowdown 0.5."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        for k in range(3):
            r.kernel("ncclDevKernel_AllGather", 200.0 * k, 100, stream=14, collective=AG)
        for k in range(3):
            t = 1000.0 + 200 * k
            r.kernel("gemm", t, 160)
            r.kernel("ncclDevKernel_AllGather", t + 5, 150, stream=14, collective=AG)
        ranks.append(r)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    (c,) = a.comm_contention
    assert (c.n_isolated, c.n_overlapped) == (6, 6)
    assert (c.isolated_transfer_us, c.overlapped_transfer_us) == pytest.approx((100, 150))
    assert c.slowdown == pytest.approx(0.5)
    nbytes = AG.out_nelems * 2
    assert c.isolated_busbw_gbps == pytest.approx(nbytes / 100_000 * 0.5)
