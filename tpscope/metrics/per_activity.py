"""Per-activity results across ranks: the rows behind the totals of `analyze_run`.

`RunAnalysis` keeps totals per step and per collective instance. A view that draws activities
(the dashboard's timeline) needs the same results per activity: which matched collective instance
each kernel belongs to, how long it waited for the last rank (metrics.md §5), its time on the
aligned clock (§6), and the activities a step's critical path visits (§7). They come from the very
functions `analyze_run` calls, so what is drawn is what is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics.activities import aligned, run_activities
from tpscope.metrics.clocks import clock_offsets
from tpscope.metrics.collectives import collective_timing, match_collectives
from tpscope.metrics.critical_path import (
    CATEGORIES,
    PathGraph,
    PathSegments,
    path_graph,
    walk_step,
    window_floor,
)
from tpscope.trace import Run

PATH_KINDS = CATEGORIES
"""Names of a critical-path segment's category, by its index."""


@dataclass(frozen=True, slots=True)
class ActivityDetail:
    """Per GPU activity of the run, all ranks (the rows of metrics' RunActivities), aligned clock."""

    rank: np.ndarray
    lane: np.ndarray  # row of that rank's RankTrace.lanes
    start_ns: np.ndarray  # aligned (metrics.md §6)
    end_ns: np.ndarray
    step: np.ndarray
    instance: np.ndarray  # matched collective instance, -1 when none
    wait_ns: np.ndarray
    graph: PathGraph
    instance_key: tuple[str, ...] = ()  # per instance: its `key` in the JSON's collectives
    windows: tuple = ()  # per rank position: its StepWindows (metrics.md §3)

    def __len__(self) -> int:
        return len(self.rank)


def activity_detail(run: Run, align: str = "auto") -> ActivityDetail | None:
    """Matching, waits and the path graph of `run`, as `analyze_run` computes them; None for a run
    without GPU activity."""
    if not run.ranks or sum(len(r.gpu) for r in run.ranks) == 0:
        return None
    acts = run_activities(run)
    match = match_collectives(acts)
    clocks = clock_offsets(acts, match, align)
    timing = collective_timing(acts, match, clocks.offsets_ns)
    graph = path_graph(acts, match, timing, clocks.offsets_ns, run.ranks)
    start_ns, end_ns = aligned(acts, clocks.offsets_ns)
    lane = np.empty(len(acts), np.int64)
    for pos, r in enumerate(run.ranks):  # once per rank
        lo, hi = acts.rank_bounds[pos], acts.rank_bounds[pos + 1]
        lane[lo:hi] = r.gpu.lane
    return ActivityDetail(
        rank=acts.rank,
        lane=lane,
        start_ns=start_ns,
        end_ns=end_ns,
        step=acts.step,
        instance=match.instance,
        wait_ns=timing.wait_ns,
        graph=graph,
        instance_key=tuple(match.key),
        windows=tuple(r.steps for r in run.ranks),
    )


def path_segments(detail: ActivityDetail, step: int) -> PathSegments:
    """The critical path of `step` (metrics.md §7): the walk `critical_paths` makes for it, from
    the latest end down to the start of its window, returned in time order (rows of ActivityDetail,
    `category` an index into PATH_KINDS; CPU segments have row -1)."""
    rows = np.flatnonzero(detail.step == step)
    if len(rows) == 0:
        empty = np.zeros(0, np.int64)
        return PathSegments(
            empty,
            empty,
            empty,
            empty.astype(np.int8),
            empty.astype(np.int8),
            empty.astype(bool),
            empty,
            empty,
        )
    last = int(rows[np.argmax(detail.end_ns[rows])])
    floor = int(detail.start_ns[rows].min())
    if detail.windows:  # the step's period, as critical_paths walks it (§3, §7)
        top = int(detail.end_ns[rows].max())
        floor = window_floor(step, list(detail.windows), detail.graph.offsets_ns, floor, top)
    seg = walk_step(detail.graph, last, floor, len(rows))
    order = np.argsort(seg.start_ns, kind="stable")
    return PathSegments(*(getattr(seg, f)[order] for f in PathSegments.__dataclass_fields__))
