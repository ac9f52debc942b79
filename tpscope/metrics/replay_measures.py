"""What is read off a replay (metrics.md §11): the step times by §3's window rule, the identity's
check with each edge kind at its median latency, and the time inferred edges carry."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.metrics.activities import NS_PER_US
from tpscope.metrics.replay import (
    EVENT,
    HELD,
    LAUNCH,
    READY,
    STREAM,
    THREAD,
    UNEXPLAINED,
    ReplayGraph,
)
from tpscope.trace.steps import partition


@dataclass(frozen=True, slots=True)
class StepTimes:
    """Per step number: the span over every rank of its activities, in µs."""

    steps: list[int]
    step_us: list[float]

    def mean_us(self, first_step: bool = False) -> float | None:
        """The mean over steps, the first profiled step left out when there are several (§3)."""
        vals = self.step_us[1:] if len(self.step_us) > 1 and not first_step else self.step_us
        return float(np.mean(vals)) if vals else None


def step_times(rg: ReplayGraph, start_ns: np.ndarray, end_ns: np.ndarray) -> StepTimes:
    """metrics.md §11: a step's time is its period, by §3's window rule on each rank: its window
    ends at the end of its last activity (plus the measured `tail` of `window_edges`) and begins
    where the previous step's ends (the first profiled step, and a step whose predecessor was not
    profiled, at its first activity less the measured `head`); over ranks, the longest."""
    has = rg.step >= 0
    if not has.any():
        return StepTimes([], [])
    uniq = np.unique(rg.step[has])
    out = np.zeros(len(uniq), np.int64)
    for _pos, steps, w_lo, w_hi in step_windows(rg, start_ns, end_ns):
        k = np.searchsorted(uniq, steps)
        out[k] = np.maximum(out[k], w_hi - w_lo)
    return StepTimes(uniq.tolist(), (out / NS_PER_US).tolist())


def step_windows(rg: ReplayGraph, start_ns: np.ndarray, end_ns: np.ndarray):
    """Per rank with profiled steps: (rank position, its steps, window starts, window ends) by
    `step_times`' rule over the given times."""
    has = rg.step >= 0
    edges = rg.window_edges
    out = []
    for pos in np.unique(rg.rank_pos[has]).tolist():  # a loop over ranks
        mine = has & (rg.rank_pos == pos)
        steps, inv = np.unique(rg.step[mine], return_inverse=True)
        lo = np.full(len(steps), np.iinfo(np.int64).max, np.int64)
        hi = np.full(len(steps), np.iinfo(np.int64).min, np.int64)
        np.minimum.at(lo, inv, start_ns[mine])
        np.maximum.at(hi, inv, end_ns[mine])
        e = edges[edges[:, 0] == pos]  # by step
        if len(e):
            j = np.minimum(np.searchsorted(e[:, 1], steps), len(e) - 1)
            ok = e[j, 1] == steps
            lo = lo - np.where(ok, e[j, 2], 0)
            hi = hi + np.where(ok, e[j, 3], 0)
        w_lo, w_hi = partition(steps, lo, hi)
        out.append((pos, steps, w_lo, w_hi))
    return out


def median_latencies(rg: ReplayGraph) -> ReplayGraph:
    """The graph with every `stream`, `event` and `launch` latency replaced by its rank's median
    for that edge kind: a replay that copies no activity's own gap (metrics.md §11's check that
    the identity comes from the graph)."""
    lat = rg.latency_ns.copy()
    for k in (STREAM, EVENT, LAUNCH):
        # a negative gap is an op nested in the one before it on its thread: kept
        sel = (rg.ready_kind == k) & (lat >= 0)
        if not sel.any():
            continue
        pos = rg.rank_pos[sel]
        for p in np.unique(pos).tolist():  # a loop over ranks
            rows = np.flatnonzero(sel)[pos == p]
            lat[rows] = int(np.median(lat[rows]))
    return replace(rg, latency_ns=lat)


def carried_by_kind(rg: ReplayGraph) -> dict[str, float]:
    """µs per rank and step during which an inferred edge set when something started: the union,
    per rank, of the gaps before activities whose start a `held` edge set, of the gaps no edge
    explains (`unexplained`, not replayed), and of the CPU threads' waits for another thread or
    (CPU runs) a collective (`thread`), within the rank's profiled step windows (its measured
    ones, by `step_times`' rule), summed over ranks and divided by ranks × steps (metrics.md
    §11)."""
    windows = {
        pos: iv.union(w_lo, w_hi)
        for pos, _s, w_lo, w_hi in step_windows(rg, rg.start_ns, rg.end_ns)
    }
    steps = np.unique(rg.step[rg.step >= 0])
    n_ranks = len(rg.cpu_base)
    denom = max(len(steps), 1) * max(n_ranks, 1)
    out = {}
    cpu_rank = np.searchsorted(rg.cpu_base, np.arange(len(rg.cpu_start_ns)), side="right") - 1
    for name, starts, gaps, rank in (
        (READY[HELD], rg.start_ns, np.where(rg.ready_kind == HELD, rg.carried_ns, 0), rg.rank_pos),
        (
            READY[UNEXPLAINED],
            rg.start_ns,
            np.where(rg.ready_kind == UNEXPLAINED, rg.carried_ns, 0),
            rg.rank_pos,
        ),
        ("thread", rg.cpu_start_ns, rg.cpu_thread_carried_ns, cpu_rank),
        (
            "thread",  # a CPU run's thread that waited for another thread or a collective
            rg.start_ns,
            np.where(rg.ready_kind == THREAD, rg.carried_ns, 0),
            rg.rank_pos,
        ),
    ):
        total = 0
        for pos in range(n_ranks):  # a loop over ranks
            sel = (rank == pos) & (gaps > 0)
            if pos not in windows:
                continue
            gap_set = iv.union(starts[sel] - gaps[sel], starts[sel])
            total += iv.total(iv.intersection(gap_set, windows[pos]))
        out[name] = out.get(name, 0.0) + total / NS_PER_US / denom
    return out


def carried_by_name(
    rg: ReplayGraph, names: np.ndarray, cpu_names: np.ndarray, top: int = 3
) -> dict[str, list[tuple[str, float]]]:
    """Per inferred edge kind, the activities (`names`, per activity) or runtime calls
    (`cpu_names`, per call: thread edges) whose gaps carry the most of `carried_by_kind`'s time:
    each gap's part within its rank's profiled step windows, summed per name, µs per rank and
    step, the `top` largest (metrics.md §11)."""
    steps = np.unique(rg.step[rg.step >= 0])
    denom = max(len(steps), 1) * max(len(rg.cpu_base), 1)
    windows = {p: iv.union(lo, hi) for p, _s, lo, hi in step_windows(rg, rg.start_ns, rg.end_ns)}
    cpu_rank = np.searchsorted(rg.cpu_base, np.arange(len(rg.cpu_start_ns)), side="right") - 1
    sources = (
        (
            READY[HELD],
            rg.start_ns,
            np.where(rg.ready_kind == HELD, rg.carried_ns, 0),
            rg.rank_pos,
            names,
        ),
        (
            READY[UNEXPLAINED],
            rg.start_ns,
            np.where(rg.ready_kind == UNEXPLAINED, rg.carried_ns, 0),
            rg.rank_pos,
            names,
        ),
        ("thread", rg.cpu_start_ns, rg.cpu_thread_carried_ns, cpu_rank, cpu_names),
        (
            "thread",
            rg.start_ns,
            np.where(rg.ready_kind == THREAD, rg.carried_ns, 0),
            rg.rank_pos,
            names,
        ),
    )
    sums: dict[str, dict[str, float]] = {}
    for kind, starts, gaps, rank, label in sources:
        per = sums.setdefault(kind, {})
        for pos, win in windows.items():  # a loop over ranks
            sel = np.flatnonzero((rank == pos) & (gaps > 0))
            if not len(sel):
                continue
            inside = iv.overlap_with_set(starts[sel] - gaps[sel], starts[sel], win)
            keys, inv = np.unique(label[sel].astype(str), return_inverse=True)
            tot = np.bincount(inv, weights=inside.astype(float), minlength=len(keys))
            for k, v in zip(keys.tolist(), tot.tolist()):  # a loop over distinct names
                if v > 0:
                    per[k] = per.get(k, 0.0) + v / NS_PER_US / denom
    return {kind: sorted(per.items(), key=lambda kv: -kv[1])[:top] for kind, per in sums.items()}


__all__ = [
    "StepTimes",
    "carried_by_kind",
    "carried_by_name",
    "median_latencies",
    "step_times",
    "step_windows",
]
