"""The critical path of each step across ranks, and its breakdown (metrics.md §7).

Predecessors are precomputed as arrays (the previous activity on the lane, the producer of a
`cudaStreamWaitEvent`, the last rank to arrive at a collective), so the walk, which loops over the
path's length, does O(1) work per step of the path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.metrics.collectives import (
    NS_PER_US,
    CollectiveMatch,
    CollectiveTiming,
    RunActivities,
    aligned,
)
from tpscope.trace import ActivityClass, StreamWaits

CATEGORIES = ("compute", "comm", "memory", "host", "idle")
HOST, IDLE = 3, 4
GAP = 5  # a path segment between activities, not host time: resolved by resolve_gaps
CROSS_LANE_TOLERANCE_NS = 10_000  # §7: an activity starting this soon after another lane's end waited for it
# class -> category; filler kernels (torch.cuda._sleep) only wait: idle
_CATEGORY_OF_CLASS = {ActivityClass.COMPUTE: 0, ActivityClass.COMM: 1, ActivityClass.MEMORY: 2, ActivityClass.FILLER: IDLE}
_LANE_SHIFT = 40  # composite (lane, correlation) keys: correlation ids are CUPTI's 32-bit ids
_NO_LAUNCH = np.iinfo(np.int64).min


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The breakdown of one step's critical path across ranks, in µs (metrics.md §7)."""

    step: int
    length_us: float
    compute_us: float
    comm_us: float
    memory_us: float
    host_us: float
    idle_us: float
    exposed_comm_ratio: float | None
    ranks: list[int]
    lanes: list[str]
    span_us: float  # latest end minus earliest start of the step's activities over all ranks


@dataclass(frozen=True, slots=True)
class PathSegments:
    """The path of one step, latest first: which activity (or gap before it) covers which time."""

    row: np.ndarray  # RunActivities row whose time (or the gap before it) this is
    start_ns: np.ndarray  # aligned clock
    end_ns: np.ndarray
    category: np.ndarray  # index into CATEGORIES, or GAP


@dataclass(frozen=True, slots=True)
class PathGraph:
    """Aligned times and predecessor arrays over every RunActivities row."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    launch_end_ns: np.ndarray  # _NO_LAUNCH where unknown
    category: np.ndarray
    lane_prev: np.ndarray  # -1: first on its lane
    cross_pred: np.ndarray  # the other-lane activity it waited for (stream wait or inferred), else -1
    instance: np.ndarray
    arrival_ns: np.ndarray  # per instance
    binding: np.ndarray  # per instance


def lane_predecessors(lane: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per row: the row before it on its lane in start order, else -1."""
    order = np.lexsort((start, lane))
    prev = np.full(len(lane), -1, np.int64)
    if len(order) > 1:
        same = lane[order][1:] == lane[order][:-1]
        prev[order[1:][same]] = order[:-1][same]
    return prev


def stream_wait_predecessors(acts: RunActivities, waits: list[StreamWaits], lane_base: np.ndarray,
                             end_ns: np.ndarray) -> np.ndarray:
    """Per row: the activity whose completion a `cudaStreamWaitEvent` made it wait for, else -1.

    The producer is the last activity on the recording stream launched before the
    `cudaEventRecord` call (correlation <= the record's); the waiter is the first activity on the
    waiting stream launched after the `cudaStreamWaitEvent` call (correlation > the wait's). Where a
    trace lacks the wait's correlation, the waiter is the first launched at or after the wait's ts.
    Several waits before one activity: the producer that ends last.
    """
    pred = np.full(len(acts), -1, np.int64)
    waiters_all: list[np.ndarray] = []
    producers_all: list[np.ndarray] = []
    for pos, w in enumerate(waits):
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        use = (w.lane >= 0) & (w.wait_on_lane >= 0) & (w.wait_on_event_corr >= 0)
        if hi == lo or not use.any():
            continue
        lane = acts.lane[lo:hi]
        corr = acts.correlation[lo:hi]
        has = np.flatnonzero(corr >= 0)
        key = (lane[has] << _LANE_SHIFT) | corr[has]
        order = np.argsort(key, kind="stable")
        key, rows = key[order], has[order]
        w_lane = w.lane[use].astype(np.int64) + lane_base[pos]
        on_lane = w.wait_on_lane[use].astype(np.int64) + lane_base[pos]
        i = np.searchsorted(key, (on_lane << _LANE_SHIFT) | w.wait_on_event_corr[use], side="right") - 1
        ic = np.clip(i, 0, max(len(key) - 1, 0))
        producer = np.where((i >= 0) & (len(key) > 0) & ((key[ic] >> _LANE_SHIFT) == on_lane), rows[ic], -1)
        w_corr = w.correlation[use]
        j = np.searchsorted(key, (w_lane << _LANE_SHIFT) | np.maximum(w_corr, 0), side="right")
        jc = np.clip(j, 0, max(len(key) - 1, 0))
        waiter = np.where((j < len(key)) & ((key[jc] >> _LANE_SHIFT) == w_lane), rows[jc], -1)
        missing = np.flatnonzero(w_corr < 0)
        if len(missing):
            waiter[missing] = _waiter_by_time(acts, lo, hi, w_lane[missing], w.start_ns[use][missing])
        ok = (producer >= 0) & (waiter >= 0)
        waiters_all.append(waiter[ok] + lo)
        producers_all.append(producer[ok] + lo)
    if not waiters_all:
        return pred
    waiter, producer = np.concatenate(waiters_all), np.concatenate(producers_all)
    order = np.lexsort((end_ns[producer], waiter))  # the last per waiter ends latest
    last = np.append(waiter[order][1:] != waiter[order][:-1], True)
    pred[waiter[order][last]] = producer[order][last]
    return pred


def _waiter_by_time(acts: RunActivities, lo: int, hi: int, lanes: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """First activity on each lane launched (else started) at or after ts; -1 if none."""
    launch = np.where(acts.launch_start_ns[lo:hi] >= 0, acts.launch_start_ns[lo:hi], acts.start_ns[lo:hi])
    out = np.full(len(lanes), -1, np.int64)
    for lane in np.unique(lanes).tolist():  # a loop over lanes, not events
        rows = np.flatnonzero(acts.lane[lo:hi] == lane)
        order = np.argsort(launch[rows], kind="stable")
        t = launch[rows][order]
        sel = np.flatnonzero(lanes == lane)
        k = np.searchsorted(t, ts[sel], side="left")
        out[sel] = np.where(k < len(t), rows[order][np.clip(k, 0, len(t) - 1)], -1)
    return out


def inferred_cross_lane_predecessors(acts: RunActivities, ranks_without_waits: list[int],
                                     tolerance_ns: int = CROSS_LANE_TOLERANCE_NS) -> np.ndarray:
    """Per row of the given rank positions: the activity on another lane of that rank that ends
    latest at or before its start, when that end is at most `tolerance_ns` before it; else -1.

    For traces without `cuda_sync` events (torch records them only on request): a kernel that
    starts a few µs after another stream's kernel ends most likely waited for its event.
    """
    pred = np.full(len(acts), -1, np.int64)
    for pos in ranks_without_waits:
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        lane, start, end = acts.lane[lo:hi], acts.start_ns[lo:hi], acts.end_ns[lo:hi]
        for k in np.unique(lane).tolist():  # a loop over lanes
            mine = np.flatnonzero(lane == k)
            other = np.flatnonzero(lane != k)
            if len(other) == 0:
                continue
            order = other[np.argsort(end[other], kind="stable")]
            ends = end[order]
            j = np.searchsorted(ends, start[mine], side="right") - 1
            jc = np.clip(j, 0, len(ends) - 1)
            ok = (j >= 0) & (start[mine] - ends[jc] <= tolerance_ns)
            pred[lo + mine[ok]] = lo + order[jc[ok]]
    return pred


def path_graph(acts: RunActivities, match: CollectiveMatch, timing: CollectiveTiming, offsets_ns: np.ndarray,
               waits: list[StreamWaits], lane_counts: list[int]) -> PathGraph:
    """Aligned times and the predecessor arrays the walk follows."""
    start, end = aligned(acts, offsets_ns)
    launch_end = np.where(acts.launch_end_ns >= 0, acts.launch_end_ns - offsets_ns[acts.rank_pos], _NO_LAUNCH)
    category = np.zeros(len(acts), np.int8)
    for cls, cat in _CATEGORY_OF_CLASS.items():
        category[acts.cls == cls] = cat
    lane_base = np.concatenate([[0], np.cumsum(lane_counts)]).astype(np.int64)
    cross = stream_wait_predecessors(acts, waits, lane_base, end)
    without = [p for p, w in enumerate(waits) if not ((w.lane >= 0) & (w.wait_on_lane >= 0)).any()]
    inferred = inferred_cross_lane_predecessors(acts, without)
    cross = np.where(cross >= 0, cross, inferred)
    return PathGraph(
        start_ns=start, end_ns=end, launch_end_ns=launch_end, category=category,
        lane_prev=lane_predecessors(acts.lane, start), cross_pred=cross,
        instance=match.instance, arrival_ns=timing.arrival_ns, binding=timing.binding,
    )


def walk_step(graph: PathGraph, last: int, floor_ns: int, n_in_step: int) -> PathSegments:
    """metrics.md §7: from `last`, the activity that ends last in the step, step back to the
    predecessor that ends latest; a comm kernel contributes its transfer part and hands its wait to
    the last rank to arrive; the gap before an activity is host time when its launch ended after
    the predecessor ended, else a gap (`GAP`, resolved by `resolve_gaps`). The walk stops where it
    reaches `floor_ns`, the step's earliest start over all ranks (clipping there); at an activity
    without predecessor, the time down to the floor is its gap. It may pass through a lagging
    rank's work of the previous step."""
    s, e, launch, cat = graph.start_ns, graph.end_ns, graph.launch_end_ns, graph.category
    inst, arrival, binding = graph.instance, graph.arrival_ns, graph.binding
    lane_prev, cross_pred = graph.lane_prev, graph.cross_pred
    floor = int(floor_ns)
    cur = int(last)
    cursor = int(e[cur])
    seg_row: list[int] = []
    seg_lo: list[int] = []
    seg_hi: list[int] = []
    seg_cat: list[int] = []

    def add(row: int, lo: int, hi: int, category: int) -> None:
        lo = max(lo, floor)
        if hi > lo:
            seg_row.append(row)
            seg_lo.append(lo)
            seg_hi.append(hi)
            seg_cat.append(category)

    for _ in range(4 * n_in_step + 64):  # a bound against cycles and runaway walks in inconsistent traces
        node = cur
        start_c = min(s[cur], cursor)
        i = inst[cur]
        if i >= 0 and arrival[i] > start_c:  # the wait part goes to the last to arrive
            t = min(arrival[i], cursor)
            add(cur, t, cursor, 1)
            node = binding[i]
            cursor = min(s[node], t)
        else:
            add(cur, start_c, cursor, cat[cur])
            cursor = start_c
        if cursor <= floor:
            break
        p, q = lane_prev[node], cross_pred[node]
        if q >= 0 and (p < 0 or e[q] > e[p]):
            p = q
        if p < 0:  # first on its lane, no known wait: the floor stands in for the predecessor's end
            add(node, floor, cursor, HOST if launch[node] > floor else GAP)
            break
        p_end = min(e[p], cursor)
        add(node, p_end, cursor, HOST if launch[node] > e[p] else GAP)
        cursor = p_end
        cur = p
    return PathSegments(np.array(seg_row, np.int64), np.array(seg_lo, np.int64), np.array(seg_hi, np.int64),
                        np.array(seg_cat, np.int8))


def resolve_gaps(segments: PathSegments, group: np.ndarray, n_groups: int, rank_pos: np.ndarray,
                 covers: list[tuple]) -> np.ndarray:
    """(n_groups, len(CATEGORIES)) totals in ns of paths whose gaps are split by what else ran (§7).

    `group` numbers the path (step) of each segment. A gap that is not host time is compute, comm
    or memory time where that rank's GPU ran such work on another lane (`covers[pos]`: compute,
    comm minus compute, memory minus both), and idle where it ran nothing. All paths at once: one
    overlap query per rank and class.
    """
    dur = segments.end_ns - segments.start_ns
    cat = segments.category.astype(np.int64)
    is_gap = cat == GAP
    totals = np.zeros((n_groups, len(CATEGORIES)))
    np.add.at(totals, (group[~is_gap], cat[~is_gap]), dur[~is_gap])
    gaps = np.flatnonzero(is_gap)
    pos = rank_pos[segments.row[gaps]]
    left = dur[gaps].astype(np.float64)
    for p in np.unique(pos).tolist():  # a loop over ranks
        mine = np.flatnonzero(pos == p)
        sel = gaps[mine]
        for k, cover in enumerate(covers[p]):
            part = iv.overlap_with_set(segments.start_ns[sel], segments.end_ns[sel], cover)
            np.add.at(totals, (group[sel], k), part)
            left[mine] -= part
    np.add.at(totals, (group[gaps], IDLE), left)
    return totals


def summarize_path(totals_ns: np.ndarray, segments: PathSegments, acts: RunActivities, step: int,
                   span_ns: int) -> CriticalPath:
    """A CriticalPath from one path's totals per category, and the ranks and lanes it visits."""
    length = int((segments.end_ns - segments.start_ns).sum())
    visited = segments.row[segments.category != GAP]
    lanes = np.unique(acts.lane[visited])
    return CriticalPath(
        step=step,
        length_us=length / NS_PER_US,
        **{f"{c}_us": float(t) / NS_PER_US for c, t in zip(CATEGORIES, totals_ns.tolist())},
        exposed_comm_ratio=float(totals_ns[1]) / length if length > 0 else None,
        ranks=sorted(int(r) for r in np.unique(acts.rank[visited]).tolist()),
        lanes=[acts.lane_labels[k] for k in lanes.tolist()],
        span_us=span_ns / NS_PER_US,
    )


def gap_covers(class_sets: list, offsets_ns: np.ndarray) -> list[tuple]:
    """Per rank position, on the aligned clock: (compute, comm minus compute, memory minus both)."""
    out = []
    for sets, o in zip(class_sets, offsets_ns.tolist()):
        comm_only = iv.difference(sets.comm, sets.compute)
        memory_only = iv.difference(sets.memory, iv.union_sets(sets.compute, sets.comm))
        out.append(tuple((a - o, b - o) for a, b in (sets.compute, comm_only, memory_only)))
    return out


def critical_paths(acts: RunActivities, graph: PathGraph, covers: list[tuple]) -> list[CriticalPath]:
    """One CriticalPath per step number present on any rank."""
    rows = np.flatnonzero(acts.step >= 0)
    if len(rows) == 0:
        return []
    rows = rows[np.argsort(acts.step[rows], kind="stable")]  # grouped by step, once
    steps, first, counts = np.unique(acts.step[rows], return_index=True, return_counts=True)
    floor = np.minimum.reduceat(graph.start_ns[rows], first)
    top = np.maximum.reduceat(graph.end_ns[rows], first)
    # the walk indexes single elements: Python lists do that several times faster than arrays
    as_lists = PathGraph(*(getattr(graph, f).tolist() for f in PathGraph.__dataclass_fields__))
    paths = []
    for k in range(len(steps)):
        group = rows[first[k]:first[k] + counts[k]]
        last = int(group[np.argmax(graph.end_ns[group])])
        paths.append(walk_step(as_lists, last, int(floor[k]), int(counts[k])))
    every = PathSegments(*(np.concatenate([getattr(p, f) for p in paths]) for f in PathSegments.__dataclass_fields__))
    owner = np.repeat(np.arange(len(paths)), [len(p.row) for p in paths])
    totals = resolve_gaps(every, owner, len(paths), acts.rank_pos, covers)
    return [summarize_path(totals[k], p, acts, int(steps[k]), int(top[k] - floor[k]))
            for k, p in enumerate(paths) if len(p.row)]
