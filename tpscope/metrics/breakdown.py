"""Per-rank, per-step time breakdown: compute, communication, memory, idle, overlap (metrics.md §4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.metrics.activities import RunActivities
from tpscope.trace import ActivityClass, RankTrace, StepWindows

NS_PER_US = 1000.0


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    """One rank's step, in µs (metrics.md §4). Fields another stage fills are None until it does."""

    rank: int
    step: int
    step_time_us: float
    compute_us: float
    comm_us: float
    memory_us: float
    idle_us: float
    hidden_comm_us: float
    exposed_comm_us: float
    exposed_comm_ratio: float | None
    overlap_ratio: float | None
    hidden_of_hideable_ratio: float | None
    comm_wait_us: float | None = None
    comm_transfer_us: float | None = None
    contention_tax_us: float | None = None
    contention_slowdown: float | None = None
    first_step: bool = False  # the first profiled step: shown, left out of means (metrics.md §3)


@dataclass(frozen=True, slots=True)
class ClassSets:
    """The union of each class's intervals over a whole rank, and the derived sets."""

    compute: iv.IntervalSet
    comm: iv.IntervalSet
    memory: iv.IntervalSet
    busy: iv.IntervalSet  # compute ∪ comm ∪ memory
    hidden_comm: iv.IntervalSet  # comm ∩ compute


def class_sets(rank: RankTrace) -> ClassSets:
    g = rank.gpu

    def of(cls: ActivityClass) -> iv.IntervalSet:
        m = g.cls == cls
        return iv.union(g.start_ns[m], g.end_ns[m])

    compute, comm, memory = (
        of(ActivityClass.COMPUTE),
        of(ActivityClass.COMM),
        of(ActivityClass.MEMORY),
    )
    return ClassSets(
        compute=compute,
        comm=comm,
        memory=memory,
        busy=iv.union_sets(compute, comm, memory),
        hidden_comm=iv.intersection(comm, compute),
    )


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def rank_breakdown(rank: RankTrace, sets: ClassSets | None = None) -> list[StepBreakdown]:
    """metrics.md §4 for every step window of one rank."""
    sets = sets or class_sets(rank)
    out: list[StepBreakdown] = []
    w = rank.steps
    for step, lo, hi in zip(w.step.tolist(), w.start_ns.tolist(), w.end_ns.tolist()):
        step_ns = hi - lo
        compute = iv.total(iv.clip(sets.compute, lo, hi))
        comm = iv.total(iv.clip(sets.comm, lo, hi))
        memory = iv.total(iv.clip(sets.memory, lo, hi))
        busy = iv.total(iv.clip(sets.busy, lo, hi))
        hidden = iv.total(iv.clip(sets.hidden_comm, lo, hi))
        exposed = comm - hidden
        out.append(
            StepBreakdown(
                rank=rank.rank,
                step=int(step),
                step_time_us=step_ns / NS_PER_US,
                compute_us=compute / NS_PER_US,
                comm_us=comm / NS_PER_US,
                memory_us=memory / NS_PER_US,
                idle_us=(step_ns - busy) / NS_PER_US,
                hidden_comm_us=hidden / NS_PER_US,
                exposed_comm_us=exposed / NS_PER_US,
                exposed_comm_ratio=_ratio(exposed, step_ns),
                overlap_ratio=_ratio(hidden, comm),
                hidden_of_hideable_ratio=_ratio(hidden, min(comm, compute))
                if comm and compute
                else None,
            )
        )
    return out


def wait_transfer_by_step(
    acts: RunActivities, wait_ns: np.ndarray, windows: Sequence[StepWindows]
) -> dict[tuple[int, int], tuple[float, float]]:
    """(rank, step) -> (comm_wait_us, comm_transfer_us) on the step windows (metrics.md §5): each
    comm activity is its wait `[s, s + wait)` then its transfer; transfer is the union of the
    transfers clipped to the window, wait the union of the waits outside any transfer, so that
    wait + transfer = comm_us and no interval counts twice. `windows[p]`: the rank at `rank_pos` p."""
    out: dict[tuple[int, int], tuple[float, float]] = {}
    for pos, w in enumerate(windows):  # a loop over ranks, not events
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        rows = lo + np.flatnonzero(acts.cls[lo:hi] == ActivityClass.COMM)
        if len(w) == 0 or len(rows) == 0:
            continue
        start, end = acts.start_ns[rows], acts.end_ns[rows]
        arrived = start + wait_ns[rows]
        moving = iv.union(arrived, end)
        waiting = iv.difference(iv.union(start, arrived), moving)
        transfer = iv.overlap_with_set(w.start_ns, w.end_ns, moving)
        wait = iv.overlap_with_set(w.start_ns, w.end_ns, waiting)
        rank = int(acts.rank[lo])
        for step, wt, tr in zip(w.step.tolist(), wait.tolist(), transfer.tolist()):
            out[(rank, int(step))] = (wt / NS_PER_US, tr / NS_PER_US)
    return out


def whole_trace_overlap_ratio(rank: RankTrace) -> float | None:
    """|comm ∩ compute| / |comm| over the whole trace, no step windows (HTA's comp_comm_overlap)."""
    sets = class_sets(rank)
    return _ratio(iv.total(sets.hidden_comm), iv.total(sets.comm))
