"""The GEMM contention view (metrics.md §8) shared by `analyze`'s terminal tables and the report:
the GEMM time budget per rank and step, the most taxed shapes and layers."""

from __future__ import annotations

from dataclasses import dataclass

from tpscope.metrics import RunAnalysis
from tpscope.metrics.contention import GemmBudget, GemmContention, TaxPart
from tpscope.metrics.contention_rank import GEMM_FLOOR_TEXT, distinct_labels, shown_gemm_shapes
from tpscope.numbers import number

TOP = 8


@dataclass(frozen=True, slots=True)
class GemmView:
    budget: GemmBudget
    shapes: tuple[GemmContention, ...]  # above the floor, the most taxed first
    layers: tuple[TaxPart, ...]
    kernels: tuple[TaxPart, ...]


def gemm_view(analysis: RunAnalysis, top: int = TOP) -> GemmView | None:
    """The view, or None for a run without GEMMs beside a transfer (or an older analysis)."""
    budget = getattr(analysis, "gemm_budget", None)
    if budget is None or budget.overlapped_us <= 0:
        return None
    shapes, _under = shown_gemm_shapes(analysis.gemm_contention)
    return GemmView(
        budget,
        tuple(shapes[:top]),
        tuple(analysis.contention_by_layer[:top]),
        tuple(analysis.contention_by_kernel[:top]),
    )


def budget_lines(view: GemmView) -> list[str]:
    """The budget in sentences, every figure µs per rank and step."""
    b = view.budget
    closes = {True: "within", False: "outside", None: "no noise band to judge"}[b.closes]
    lines = [
        f"GEMM time per rank and step: {number(b.gemm_us, 'count')} µs = {number(b.predicted_us, 'count')} alone (baselines) "
        f"+ {number(b.tax_us, 'count')} tax beside transfers + {number(b.uncovered_us, 'count')} without a baseline "
        f"+ {number(b.residual_us, 'count')} unexplained ({closes} the noise band ±{number(b.noise_band, 'ratio')} of the isolated samples).",
        f"Coverage: {number(b.coverage, 'ratio')} of the overlapped GEMM time ({number(b.overlapped_us, 'count')} µs) has a baseline.",
        f"Tax: {number(b.sm_us, 'count')} µs from fewer SMs, {number(b.interference_us, 'count')} µs interference, {number(b.unsplit_us, 'count')} µs "
        "not split (no isolated time on as many SMs; `tpscope calibrate` measures it).",
    ]
    if b.reference_gemm_us is not None:
        lines.append(
            f"The reference run's GEMMs take {number(b.reference_gemm_us, 'count')} µs per rank and step."
        )
    return lines


def shape_rows(view: GemmView) -> tuple[list[str], list[list[str]]]:
    return (
        [
            "GEMM shape (M×K×N)",
            "overlapped",
            "baseline",
            "alone µs",
            "same SMs µs",
            "overlapped µs",
            "slowdown",
            "tax µs/step",
        ],
        [
            [
                g.shape,
                str(g.n_overlapped),
                g.rule if g.source is None else f"{g.rule} ({g.source})",
                number(g.baseline_us, "count"),
                number(g.same_sm_us, "count"),
                number(g.overlapped_median_us, "count"),
                number(g.slowdown, "relative"),
                number(g.tax_us_per_step, "count"),
            ]
            for g in view.shapes
        ],
    )


NAME_CHARS = 60  # a kernel's name cut here, longer where two rows would read the same


FLOOR_LINE = f"{GEMM_FLOOR_TEXT}; every shape counts in the budget."
"""What the shape table leaves out, as it states it (metrics.md §8, "Ranking")."""


def part_rows(parts: tuple[TaxPart, ...], what: str) -> tuple[list[str], list[list[str]]]:
    return (
        [what, "GEMM µs/step", "alone µs/step", "tax µs/step", "fewer SMs", "interference"],
        [
            [
                name,
                number(p.gemm_us, "count"),
                number(p.baseline_us, "count"),
                number(p.tax_us, "count"),
                number(p.sm_us, "count"),
                number(p.interference_us, "count"),
            ]
            for name, p in zip(distinct_labels([p.name for p in parts], NAME_CHARS), parts)
        ],
    )
