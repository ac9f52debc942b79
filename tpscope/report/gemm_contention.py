"""The GEMM contention view (metrics.md §8) shared by `analyze`'s terminal tables and the report:
the GEMM time budget per rank and step, the most taxed shapes and layers."""

from __future__ import annotations

from dataclasses import dataclass

from tpscope.metrics import RunAnalysis
from tpscope.metrics.contention import GemmBudget, GemmContention, TaxPart

TOP = 8


@dataclass(frozen=True, slots=True)
class GemmView:
    budget: GemmBudget
    shapes: tuple[GemmContention, ...]  # the most taxed first
    layers: tuple[TaxPart, ...]
    kernels: tuple[TaxPart, ...]


def gemm_view(analysis: RunAnalysis, top: int = TOP) -> GemmView | None:
    """The view, or None for a run without GEMMs beside a transfer (or an older analysis)."""
    budget = getattr(analysis, "gemm_budget", None)
    if budget is None or budget.overlapped_us <= 0:
        return None
    shapes = [g for g in analysis.gemm_contention if g.n_overlapped > 0]
    return GemmView(budget, tuple(shapes[:top]), tuple(analysis.contention_by_layer[:top]),
                    tuple(analysis.contention_by_kernel[:top]))


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _pct(x: float | None, sign: bool = False) -> str:
    return "-" if x is None else (f"{100 * x:+.1f}%" if sign else f"{100 * x:.1f}%")


def budget_lines(view: GemmView) -> list[str]:
    """The budget in sentences, every figure µs per rank and step."""
    b = view.budget
    closes = {True: "within", False: "outside", None: "no noise band to judge"}[b.closes]
    lines = [
        f"GEMM time per rank and step: {_n(b.gemm_us)} µs = {_n(b.predicted_us)} alone (baselines) "
        f"+ {_n(b.tax_us)} tax beside transfers + {_n(b.uncovered_us)} without a baseline "
        f"+ {_n(b.residual_us)} unexplained ({closes} the noise band ±{_pct(b.noise_band)} of the isolated samples).",
        f"Coverage: {_pct(b.coverage)} of the overlapped GEMM time ({_n(b.overlapped_us)} µs) has a baseline.",
        f"Tax: {_n(b.sm_us)} µs from fewer SMs, {_n(b.interference_us)} µs interference, {_n(b.unsplit_us)} µs "
        "not split (no isolated time on as many SMs; `tpscope calibrate` measures it).",
    ]
    if b.reference_gemm_us is not None:
        lines.append(f"The reference run's GEMMs take {_n(b.reference_gemm_us)} µs per rank and step.")
    return lines


def shape_rows(view: GemmView) -> tuple[list[str], list[list[str]]]:
    return (["GEMM shape (M×K×N)", "overlapped", "baseline", "alone µs", "same SMs µs", "overlapped µs",
             "slowdown", "tax µs/step"],
            [[g.shape, str(g.n_overlapped), g.rule if g.source is None else f"{g.rule} ({g.source})",
              _n(g.baseline_us), _n(g.same_sm_us), _n(g.overlapped_median_us), _pct(g.slowdown, sign=True),
              _n(g.tax_us_per_step)] for g in view.shapes])


def part_rows(parts: tuple[TaxPart, ...], what: str) -> tuple[list[str], list[list[str]]]:
    return ([what, "GEMM µs/step", "alone µs/step", "tax µs/step", "fewer SMs", "interference"],
            [[p.name, _n(p.gemm_us), _n(p.baseline_us), _n(p.tax_us), _n(p.sm_us), _n(p.interference_us)]
             for p in parts])
