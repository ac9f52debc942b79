"""metrics.md §9: Flux overlap efficiency and attained saving against an unfused reference run."""

from __future__ import annotations

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.trace import load_run

AG = Collective("_allgather_base", group_size=2)


def _serial(tmp_path):
    """Unfused: GEMM 100 µs, then the all-gather 50 µs, on both ranks: path 150, T_comp 100."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.kernel("gemm", 0, 100)
        r.kernel("ncclDevKernel_AllGather", 100, 50, collective=AG)
        ranks.append(r)
    return load_run(write_run(tmp_path / "base", ranks))


def _fused(tmp_path, gemm_us: float):
    """Fused: the all-gather on its own stream beside the GEMM."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.kernel("gemm", 0, gemm_us)
        r.kernel("ncclDevKernel_AllGather", 0, 50, stream=14, collective=AG)
        ranks.append(r)
    return load_run(write_run(tmp_path / f"fused{gemm_us}", ranks))


@pytest.mark.parametrize("gemm_us,flux", [(100, 1.0), (120, 1 - 20 / 50), (150, 0.0)])
def test_reference_run_gives_flux_efficiency_and_attained_saving(tmp_path, gemm_us, flux):
    a = analyze_run(_fused(tmp_path, gemm_us), reference=_serial(tmp_path))
    assert a.critical_path[0].length_us == pytest.approx(gemm_us)
    assert a.summary.flux_overlap_efficiency == pytest.approx(flux)
    # T_base 150, max(T_comp 100, T_comm 50) = 100: the same denominator here
    assert a.summary.attained_saving == pytest.approx((150 - gemm_us) / 50)


def test_without_reference_both_are_null(tmp_path):
    a = analyze_run(_fused(tmp_path, 100))
    assert a.summary.flux_overlap_efficiency is None and a.summary.attained_saving is None


def test_no_overlap_figures_unless_both_runs_communicate():
    from tpscope.metrics.across_runs import RunTimes, compare

    quiet = RunTimes(step_us=900.0, compute_us=800.0, comm_us=0.0)
    busy = RunTimes(step_us=1000.0, compute_us=700.0, comm_us=400.0)
    assert compare(quiet, RunTimes(step_us=1000.0, compute_us=800.0, comm_us=0.0)) == (None, None)
    assert compare(quiet, busy) == (None, None)
    assert compare(busy, quiet) == (None, None)
    fused = RunTimes(step_us=800.0, compute_us=700.0, comm_us=400.0)
    assert compare(fused, busy) == pytest.approx((1 - 100 / 300, 200 / 300))


def _three_steps(tmp_path, name: str, gemm_us: list[float], fused: bool):
    """Steps 1-3 back to back (each begins where the previous one's work ended, so that a step's
    period is its work, metrics.md §3), a GEMM of `gemm_us[k]` µs and a 50 µs all-gather in each:
    after the GEMM (unfused) or beside it on its own stream (fused)."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        t0 = 0.0
        for k, gemm in enumerate(gemm_us):
            step_us = max(gemm, 50.0) if fused else gemm + 50.0
            r.gpu_annotation(f"ProfilerStep#{k + 1}", t0, step_us)
            r.kernel("gemm", t0, gemm)
            ag = Collective("_allgather_base", group_size=2, seq=k)
            if fused:
                r.kernel("ncclDevKernel_AllGather", t0, 50, stream=14, collective=ag)
            else:
                r.kernel("ncclDevKernel_AllGather", t0 + gemm, 50, collective=ag)
            t0 += step_us
        ranks.append(r)
    return load_run(write_run(tmp_path / name, ranks))


def test_both_runs_leave_out_their_first_profiled_step(tmp_path):
    """The first step of each run is a slow warm-up. By hand over steps 2-3: T_base = 100 + 50,
    T_comp = 100, T_comm = 50, T_fused = 120, so E = 1 - (120 - 100) / (150 - 100) = 0.6 and the
    attained saving (150 - 120) / (150 - max(100, 50)) = 0.6. With the reference's first step
    (GEMM 200) T_base would be 550 / 3 and T_comp 400 / 3: E = 1.27 (§9)."""
    base = _three_steps(tmp_path, "base", [200, 100, 100], fused=False)
    fused = _three_steps(tmp_path, "fused", [250, 120, 120], fused=True)
    a = analyze_run(fused, reference=base)
    assert a.summary.flux_overlap_efficiency == pytest.approx(0.6)
    assert a.summary.attained_saving == pytest.approx(0.6)
