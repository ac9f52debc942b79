"""Which contended kernel signatures a table shows, and in what order (metrics.md §8, "Ranking").

A signature's tax is what its slowdown adds per rank and step: `n_overlapped × (overlapped median -
isolated median) / rank-steps`. Tables show the signatures that cost the most first, and only those
above a floor of significance: at least MIN_SAMPLES instances alone and beside communication (a
median of fewer moves with one outlier) and a median difference of at least MIN_DELTA_US (traces
that round times to whole µs make a 2 µs kernel read 3 µs: +50% from rounding alone).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_SAMPLES = 10
MIN_DELTA_US = 2.0
FLOOR_TEXT = (
    f"shown: at least {MIN_SAMPLES} instances alone and beside communication, and a median "
    f"difference of {MIN_DELTA_US:g} µs or more"
)
"""The floor, as the tables state it."""


@dataclass(frozen=True, slots=True)
class RankedKernel:
    """One contended signature above the floor, with its tax per rank and step."""

    signature: str
    n_isolated: int
    n_overlapped: int
    isolated_median_us: float
    overlapped_median_us: float
    slowdown: float
    tax_us_per_step: float
    baseline: str | None


def ranked_kernels(kernel_contention, n_rank_steps: int) -> tuple[list[RankedKernel], int]:
    """The signatures above the floor, the most tax per rank and step first, and how many with
    both medians fell under it."""
    n = max(int(n_rank_steps), 1)
    kept, under = [], 0
    for k in kernel_contention or ():
        if k.isolated_median_us is None or k.overlapped_median_us is None or k.slowdown is None:
            continue
        delta = float(k.overlapped_median_us) - float(k.isolated_median_us)
        if min(k.n_isolated, k.n_overlapped) < MIN_SAMPLES or abs(delta) < MIN_DELTA_US:
            under += 1
            continue
        kept.append(
            RankedKernel(
                k.signature,
                int(k.n_isolated),
                int(k.n_overlapped),
                float(k.isolated_median_us),
                float(k.overlapped_median_us),
                float(k.slowdown),
                k.n_overlapped * delta / n,
                k.baseline,
            )
        )
    kept.sort(key=lambda k: -k.tax_us_per_step)
    return kept, under


GEMM_FLOOR_TEXT = (
    f"shown: shapes with at least {MIN_SAMPLES} GEMMs alone (behind the baseline) and beside a "
    f"transfer, and a median difference of {MIN_DELTA_US:g} µs or more"
)
"""The floor of the GEMM-shape tables, as they state it."""


def shown_gemm_shapes(gemm_contention) -> tuple[list, int]:
    """The GEMM shapes (metrics.md §8) above the same floor as the signatures: a baseline from at
    least MIN_SAMPLES isolated GEMMs, at least MIN_SAMPLES beside a transfer, medians at least
    MIN_DELTA_US apart; the most tax per rank and step first, and how many fell under it."""
    kept, under = [], 0
    for g in gemm_contention or ():
        if g.n_overlapped <= 0:
            continue
        if (
            g.baseline_us is None
            or g.overlapped_median_us is None
            or min(g.n_isolated, g.n_overlapped) < MIN_SAMPLES
            or abs(float(g.overlapped_median_us) - float(g.baseline_us)) < MIN_DELTA_US
        ):
            under += 1
            continue
        kept.append(g)
    kept.sort(key=lambda g: -g.tax_us_per_step)
    return kept, under


def distinct_labels(names: list[str], width: int) -> list[str]:
    """Each name cut to `width` characters (`…` where cut), longer where two would read the same:
    the shortest cut, at most the whole name, that tells every row apart."""
    out = []
    for name in names:
        w = width
        while w < len(name) and sum(1 for o in names if o[:w] == name[:w]) > 1:
            w += 8
        out.append(name if len(name) <= w else name[: w - 1] + "…")
    return out
