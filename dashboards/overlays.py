"""Per-activity results the Timeline draws over the lanes, from `tpscope.metrics`' own functions.

`RunAnalysis` keeps the totals (the JSON); which kernels belong to one collective instance, how
long each waited, and which activities a step's critical path visits are per-activity arrays of
the same functions `analyze_run` calls (metrics.md §5-§7). Nothing is matched or walked here:
this module only calls them and puts their rows on the timeline's (rank, lane) coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics.clocks import clock_offsets
from tpscope.metrics.collectives import collective_timing, match_collectives, run_activities
from tpscope.metrics.critical_path import CATEGORIES, GAP, PathGraph, path_graph, walk_step
from tpscope.trace import Run

KIND_NAMES = (*CATEGORIES, "gap")  # index GAP == 5


@dataclass(frozen=True, slots=True)
class CrossRank:
    """Per activity of the run (metrics' RunActivities rows), on the aligned clock."""

    rank: np.ndarray
    lane: np.ndarray  # row of that rank's RankTrace.lanes
    start_ns: np.ndarray  # aligned (metrics.md §6)
    end_ns: np.ndarray
    step: np.ndarray
    instance: np.ndarray  # matched collective instance, -1 when none
    wait_ns: np.ndarray
    graph: PathGraph

    def __len__(self) -> int:
        return len(self.rank)


@dataclass(frozen=True, slots=True)
class Overlay:
    """Parallel arrays of intervals on (rank, lane), aligned ns; `group` ties rows together."""

    rank: np.ndarray
    lane: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    group: np.ndarray  # collective instance, or the path's order
    text: np.ndarray  # object

    def __len__(self) -> int:
        return len(self.rank)

    def take(self, rows) -> Overlay:
        return Overlay(*(getattr(self, f)[rows] for f in self.__slots__))


def _empty_overlay() -> Overlay:
    return Overlay(*(np.zeros(0, np.int64) for _ in range(5)), np.zeros(0, dtype=object))


def cross_rank(run: Run, align: str = "auto") -> CrossRank | None:
    """Matching, wait and the path graph of `run`, as analyze_run computes them."""
    if not run.ranks or sum(len(r.gpu) for r in run.ranks) == 0:
        return None
    acts = run_activities(run)
    match = match_collectives(acts)
    clocks = clock_offsets(acts, match, align)
    timing = collective_timing(acts, match, clocks.offsets_ns)
    graph = path_graph(acts, match, timing, clocks.offsets_ns, [r.waits for r in run.ranks],
                       [len(r.lanes) for r in run.ranks])
    lane = np.empty(len(acts), np.int64)
    for pos, r in enumerate(run.ranks):  # once per rank
        lo, hi = acts.rank_bounds[pos], acts.rank_bounds[pos + 1]
        lane[lo:hi] = r.gpu.lane[acts.row[lo:hi]]
    return CrossRank(rank=acts.rank, lane=lane, start_ns=graph.start_ns, end_ns=graph.end_ns, step=acts.step,
                     instance=match.instance, wait_ns=timing.wait_ns, graph=graph)


def _member_rows(x: CrossRank, step: int) -> np.ndarray:
    rows = np.flatnonzero((x.instance >= 0) & (x.step == step))
    return rows[np.lexsort((x.rank[rows], x.instance[rows]))]


def collective_members(x: CrossRank, step: int) -> Overlay:
    """Every rank's kernel of each matched instance of `step`, ordered by instance then rank."""
    rows = _member_rows(x, step)
    return Overlay(x.rank[rows], x.lane[rows], x.start_ns[rows], x.end_ns[rows], x.instance[rows],
                   np.full(len(rows), "collective", dtype=object))


def wait_parts(x: CrossRank, step: int) -> Overlay:
    """The waiting part [start, start + wait] of each member kernel of `step` that waited (§5)."""
    rows = _member_rows(x, step)
    rows = rows[x.wait_ns[rows] > 0]
    return Overlay(x.rank[rows], x.lane[rows], x.start_ns[rows], x.start_ns[rows] + x.wait_ns[rows],
                   x.instance[rows], np.full(len(rows), "waiting for the last rank to arrive", dtype=object))


def arrival_us(members: Overlay) -> np.ndarray:
    """Per member: its start after the first member of its instance started (µs)."""
    if len(members) == 0:
        return np.zeros(0)
    first = np.full(int(members.group.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(first, members.group, members.start_ns)
    return (members.start_ns - first[members.group]) / 1000.0


def critical_path(x: CrossRank, step: int) -> Overlay:
    """The segments of `step`'s critical path in time order, each on the lane of its activity."""
    rows = np.flatnonzero(x.step == step)
    if len(rows) == 0:
        return _empty_overlay()
    # the same call critical_paths makes for this step: from the latest end, down to the earliest start
    last = int(rows[np.argmax(x.graph.end_ns[rows])])
    seg = walk_step(x.graph, last, int(x.graph.start_ns[rows].min()), len(rows))
    if len(seg.row) == 0:
        return _empty_overlay()
    order = np.argsort(seg.start_ns, kind="stable")
    rows = seg.row[order]
    kinds = np.array(KIND_NAMES, dtype=object)[np.minimum(seg.category[order], GAP)]
    return Overlay(x.rank[rows], x.lane[rows], seg.start_ns[order], seg.end_ns[order],
                   np.arange(len(rows)), kinds)
