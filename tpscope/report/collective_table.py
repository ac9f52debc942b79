"""Collectives per name for a report: exposed, transfer and wait time per step, bus bandwidth,
from the matched instances of `RunAnalysis.collectives` (metrics.md §5); for runs where nothing
matched, the kernel time per collective from `kernel_stats` (all of it counted as transfer)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics import RunAnalysis
from tpscope.metrics.kernel_stats import KernelTime
from tpscope.numbers import size_text
from tpscope.report.compare import MIN_SAMPLES, median_difference_ci


@dataclass(frozen=True, slots=True)
class CollectiveStat:
    """One collective name of a run; times are µs per step (summed over its instances in a step)."""

    collective: str
    messages: str  # per step, e.g. "4 x 8 MiB"
    exposed_us: float | None  # None: not matched across ranks (kernel time only)
    transfer_us: float
    wait_us: float | None
    busbw_gbps: float | None  # median over instances
    exposed_by_step: tuple[float, ...]
    group: str = ""  # the process group (metrics.md §5), "inferred", or "" when unmatched


@dataclass(frozen=True, slots=True)
class CollectiveDelta:
    """One collective name, baseline -> candidate (None on the side where it does not occur)."""

    collective: str
    baseline: CollectiveStat | None
    candidate: CollectiveStat | None
    delta_exposed_us: float | None
    significant: bool | None
    group: str = ""

    @property
    def label(self) -> str:
        """The collective's name, with its process group when known."""
        return f"{self.collective} ({self.group})" if self.group else self.collective


def _field(items: list, name: str) -> np.ndarray:
    return np.array(
        [np.nan if getattr(i, name) is None else getattr(i, name) for i in items], dtype=float
    )


def _group(c) -> str:
    """A collective's process group (metrics.md §5), or "inferred"."""
    return "inferred" if c.inferred else c.group


def collective_stats(
    analysis: RunAnalysis, fallback: tuple[KernelTime, ...] = ()
) -> tuple[CollectiveStat, ...]:
    """Per collective name, most exposed time first."""
    items = list(analysis.collectives)
    if not items:
        return tuple(
            CollectiveStat(k.key, k.detail or "", None, k.us_per_step, None, None, ())
            for k in fallback
        )
    names = np.array([f"{i.collective}\x00{_group(i)}" for i in items], dtype=object)
    steps = np.array([i.step for i in items], dtype=np.int64)
    nbytes = _field(items, "bytes")
    exposed, transfer, wait, busbw = (
        _field(items, f) for f in ("exposed_us", "transfer_us", "wait_us", "busbw_gbps")
    )
    n_steps = max(len(np.unique(steps)), 1)
    out = []
    for name in sorted(set(names.tolist())):  # a loop over collective names
        m = names == name
        uniq_steps = np.unique(steps[m])
        by_step = np.array([exposed[m & (steps == s)].sum() for s in uniq_steps])
        sizes, counts = np.unique(nbytes[m], return_counts=True)
        messages = " + ".join(
            f"{c / n_steps:g} x {size_text(int(b)) if np.isfinite(b) else '?'}"
            for b, c in zip(sizes[::-1], counts[::-1])
        )
        bw = busbw[m][np.isfinite(busbw[m])]
        collective, group = name.split("\x00")
        out.append(
            CollectiveStat(
                collective,
                messages,
                float(exposed[m].sum() / n_steps),
                float(transfer[m].sum() / n_steps),
                float(wait[m].sum() / n_steps),
                float(np.median(bw)) if len(bw) else None,
                tuple(float(v) for v in by_step),
                group,
            )
        )
    return tuple(sorted(out, key=lambda s: (-(s.exposed_us or 0.0), s.collective)))


def collective_deltas(
    baseline: tuple[CollectiveStat, ...], candidate: tuple[CollectiveStat, ...]
) -> tuple[CollectiveDelta, ...]:
    """Every collective name of either run, the one whose exposed time grew most first."""
    b = {(s.collective, s.group): s for s in baseline}
    c = {(s.collective, s.group): s for s in candidate}
    out = []
    for name in sorted(b.keys() | c.keys()):
        sb, sc = b.get(name), c.get(name)
        eb = sb.exposed_us if sb else 0.0
        ec = sc.exposed_us if sc else 0.0
        delta = ec - eb if eb is not None and ec is not None else None
        significant = None
        xb = sb.exposed_by_step if sb else ()
        xc = sc.exposed_by_step if sc else ()
        if delta is not None and min(len(xb), len(xc)) >= MIN_SAMPLES:
            low, high = median_difference_ci(np.asarray(xb), np.asarray(xc))
            significant = low > 0 or high < 0
        out.append(CollectiveDelta(name[0], sb, sc, delta, significant, name[1]))
    return tuple(sorted(out, key=lambda d: (-(d.delta_exposed_us or 0.0), d.collective)))
