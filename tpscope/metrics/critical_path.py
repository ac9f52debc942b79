"""The critical path of each step across ranks: a backward walk over a dependency graph whose edges
are named in every segment (metrics.md §7).

The graph's nodes are the GPU activities of every rank and the CPU threads that launched them. Its
edges are precomputed as arrays (sorts and `searchsorted`): the previous activity on the stream, the
launch call (correlation id), the producer of a `cudaStreamWaitEvent`, the last rank to arrive at a
collective, the other-stream activity that held a ready kernel back, and per CPU thread its runtime
calls in order with the synchronizations that made the CPU wait for the GPU. The walk does O(1) work
per GPU activity on the path; a CPU stretch is cut into segments by array slicing.
"""

from __future__ import annotations

import array
import bisect
import dataclasses
import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tpscope.jsonable import (
    Coded,
    MicrosOfNs,
    Records,
    in_parts,
    records_body,
    records_enclosed,
    sliced,
)
from tpscope.metrics.activities import NS_PER_US, RunActivities
from tpscope.metrics.collectives import CollectiveMatch, CollectiveTiming
from tpscope.metrics.forked import Forked, ForkedCall, SharedTexts, map_forked
from tpscope.metrics.host_names import HostNames, host_names, named_pieces
from tpscope.metrics.thread_edges import cpu_run_waits
from tpscope.trace import ActivityClass, GpuActivities, RankTrace, StreamWaits
from tpscope.trace.beside import at_once
from tpscope.trace.columns import lookup, sorted_unique, unique_ids

# how deep a path's segments sit in `tpscope analyze --json` (the document's list of paths, a
# path's fields): their text is written indented so, in a worker process where the walks fork
SEGMENTS_INDENT = 3
CATEGORIES = ("compute", "comm", "memory", "host", "idle")
COMPUTE, COMM, MEMORY, HOST, IDLE = range(5)
# metrics.md §7: the edge that put each segment on the path. `end` marks the activity the walk
# starts from (the latest end of the step); `none` a gap that no edge in the trace explains.
EDGES = (
    "end",
    "stream",
    "launch",
    "cpu",
    "sync",
    "event",
    "collective",
    "resource",
    "none",
    "thread",
)
END, STREAM, LAUNCH, CPU, SYNC, EVENT, COLLECTIVE, RESOURCE, NONE, THREAD = range(len(EDGES))
HELD_TOLERANCE_NS = 10_000  # §7: a ready activity that starts later than this was held back
# class -> category; filler kernels (torch.cuda._sleep) only wait: idle
_CATEGORY_OF_CLASS = {
    ActivityClass.COMPUTE: COMPUTE,
    ActivityClass.COMM: COMM,
    ActivityClass.MEMORY: MEMORY,
    ActivityClass.FILLER: IDLE,
}
_LANE_SHIFT = 40  # composite (lane, correlation) keys: correlation ids are CUPTI's 32-bit ids
_NONE = np.iinfo(np.int64).min
# §7: runtime calls that block the CPU until the GPU has finished something (CUDA and HIP, runtime
# and driver API), by lower-case name prefix or substring. Only a call during which an activity of
# its GPU ended counts as having waited.
SYNC_CALL_PREFIXES = ("cudamemcpy", "cumemcpy", "hipmemcpy")
SYNC_CALL_SUBSTRINGS = ("synchronize",)


def is_sync_call(name: str) -> bool:
    lower = name.lower()
    return lower.startswith(SYNC_CALL_PREFIXES) or any(s in lower for s in SYNC_CALL_SUBSTRINGS)


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
    inferred_us: float = 0.0  # time on segments whose edge was inferred from timing
    inferred_share: float | None = None
    edge_us: dict[str, float] | None = None  # time per edge kind
    host_ops_us: dict[str, float] | None = (
        None  # host time per CPU op, the largest first (at most 10)
    )
    first_step: bool = False  # the first profiled step: shown, left out of means (§3)
    segments: Sequence[dict] | None = None


@dataclass(frozen=True, slots=True)
class PathSegments:
    """The path of one step, latest first: which time lies on it, on what, and why."""

    row: np.ndarray  # RunActivities row of a GPU segment, -1 for a CPU segment
    start_ns: np.ndarray  # aligned clock
    end_ns: np.ndarray
    category: np.ndarray  # index into CATEGORIES
    edge: np.ndarray  # index into EDGES
    inferred: np.ndarray  # bool
    rank_pos: np.ndarray
    call: np.ndarray  # CpuThreads row of a CPU segment (its name is that call's op), else -1
    # host time's name: index into the rank's HostNames.strings (the innermost op or user range
    # holding it), -1 where none does (then named as above)
    label: np.ndarray | None = None
    thread: np.ndarray | None = None  # the CPU thread of a host segment, -1 where unknown

    def __len__(self) -> int:
        return len(self.row)


@dataclass(frozen=True, slots=True)
class CpuThreads:
    """One rank's CUDA runtime calls, ordered by (thread, end): one thread's calls are contiguous
    (`thread_lo`, `thread_hi` per call), on the aligned clock."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    tid: np.ndarray
    op: np.ndarray  # index into `strings`: the CPU op that made the call (else the call's name)
    thread_lo: np.ndarray
    thread_hi: np.ndarray
    # the latest blocking synchronization at or before this call on its thread, -1
    prev_sync: np.ndarray
    waited_for: np.ndarray  # per call: the rank's activity whose end a blocking sync waited for, -1
    strings: tuple[str, ...]
    launched: np.ndarray | None = None  # per call: whether it launched an activity of the rank
    # the latest launch at or before this call on its thread whose activity started more than
    # HELD_TOLERANCE_NS after the call ended (the thread was ahead of the GPU), -1
    prev_ahead: np.ndarray | None = None
    # per thread, in call order: (its first call, its tid, the calls that launched an activity or
    # waited for one, their ends)
    workers: tuple = ()
    string_objects: np.ndarray | None = None  # `strings` as an object array

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class RankGraph:
    """One rank's part of the graph, its rows those of its activities (RunActivities rows
    `base + k`): aligned times and the predecessors within the rank, as Python arrays of int64
    (`_ints`: the walk indexes single elements, which these do faster than numpy arrays or lists)."""

    base: int
    start_ns: array.array
    end_ns: array.array
    launch_end_ns: array.array  # _NONE where unknown
    launch_call: array.array  # CpuThreads row of the launch call, -1 where unknown
    category: array.array
    lane_prev: array.array  # -1: first on its lane
    event_pred: array.array  # producer of a recorded cudaStreamWaitEvent, else -1
    other_prev: array.array  # latest-ending activity on another lane ending by its start, else -1
    instance: array.array  # matched collective instance, -1
    has_waits: bool  # the rank's trace records stream waits
    cpu: CpuThreads
    # what held the GPU when a ready activity could not start (`resource_holders`), else -1
    holder: array.array | None = None
    names: HostNames | None = None  # the rank's CPU ops and user ranges, to name host time by
    cpu_run: bool = False  # the rank's activities are CPU threads' (metrics.md §1)
    tid: array.array | None = None  # a CPU run's activity: its thread
    # a CPU run's collective: the issuing thread's last activity before it, -1; and that thread
    issuer_prev: array.array | None = None
    issuer_tid: array.array | None = None
    issuer_label: list | None = None  # the issuing op's name, index into `names.strings`, -1
    # a CPU run's activity: the collective its thread issued and then waited for, ending in the
    # thread's gap before it, -1
    waited_coll: array.array | None = None
    run_start: array.array | None = None  # activities' starts, sorted
    run_last: array.array | None = None  # per prefix of those: the activity that ends last


RECENT_RANKS = 64  # rank graphs a PathGraph keeps once built


class PathGraph:
    """The walk's graph over every rank (metrics.md §7): the cross-rank edges (per collective
    instance, its last arrival and the activity that arrived last) and each rank's `RankGraph`,
    built from its trace when first asked for (the last RECENT_RANKS kept), so that a run of
    thousands of ranks never holds every rank's graph at once."""

    def __init__(
        self,
        acts: RunActivities,
        match: CollectiveMatch,
        timing: CollectiveTiming,
        offsets_ns: np.ndarray,
        ranks: Sequence[RankTrace],
        threads: int = 1,
    ) -> None:
        self.acts = acts
        self.threads = threads  # a rank graph's build may use this many (`rank_graph`)
        self.offsets_ns = offsets_ns
        self.ranks = ranks
        self.rank_pos = acts.rank_pos
        self.instance = match.instance
        self.arrival_ns = _ints(timing.arrival_ns)
        self.binding = _ints(timing.binding)
        self.bounds = acts.rank_bounds.tolist()
        self._built: OrderedDict[int, RankGraph] = OrderedDict()
        self._lock = threading.Lock()  # the dashboard's callbacks share one graph

    def pos_of(self, row: int) -> int:
        """The rank position of a RunActivities row."""
        return bisect.bisect_right(self.bounds, row) - 1

    def rank(self, pos: int) -> RankGraph:
        with self._lock:
            part = self._built.get(pos)
            if part is not None:
                self._built.move_to_end(pos)
                return part
        part = rank_graph(
            self.acts, self.instance, self.ranks[pos], pos, self.offsets_ns, self.threads
        )
        with self._lock:
            self._built[pos] = part
            while len(self._built) > RECENT_RANKS:
                self._built.popitem(last=False)
        return part

    def _by_rank(self, seg: PathSegments, use: np.ndarray, out: np.ndarray, value) -> np.ndarray:
        """`out` with `value(rank graph, selected segments)` filled in for the segments `use`
        selects, a rank at a time (a loop over the ranks on the path, not over segments)."""
        hit = np.flatnonzero(use)
        pos = seg.rank_pos[hit]
        for p in np.unique(pos).tolist():
            sel = hit[pos == p]
            out[sel] = value(self.rank(p), sel)
        return out

    def call_threads(self, seg: PathSegments) -> np.ndarray:
        """Per segment: the CPU thread of its call, -1 for a segment without one."""
        out = np.full(len(seg.call), -1, np.int64)
        return self._by_rank(seg, seg.call >= 0, out, lambda g, k: g.cpu.tid[seg.call[k]])

    def labels(self, seg: PathSegments) -> np.ndarray:
        """Per segment: the op or user range naming its host time (an object array), "" for a
        segment without one."""
        out = np.full(len(seg.row), "", dtype=object)
        if seg.label is None:
            return out
        return self._by_rank(
            seg, seg.label >= 0, out, lambda g, k: g.names.string_objects[seg.label[k]]
        )

    def call_ops(self, seg: PathSegments) -> np.ndarray:
        """Per segment: the CPU op of its call (an object array), "" for a segment without one."""
        out = np.full(len(seg.call), "", dtype=object)
        return self._by_rank(
            seg, seg.call >= 0, out, lambda g, k: g.cpu.string_objects[g.cpu.op[seg.call[k]]]
        )


def _objects(strings: Sequence[str]) -> np.ndarray:
    """`strings` as an object array (indexed by arrays without copying the strings)."""
    out = np.empty(len(strings), dtype=object)
    out[:] = strings
    return out


def lane_predecessors(lane: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per row: the row before it on its lane in start order, else -1."""
    order = np.lexsort((start, lane))
    prev = np.full(len(lane), -1, np.int64)
    if len(order) > 1:
        same = lane[order][1:] == lane[order][:-1]
        prev[order[1:][same]] = order[:-1][same]
    return prev


def stream_wait_predecessors(g: GpuActivities, w: StreamWaits, end_ns: np.ndarray) -> np.ndarray:
    """Per activity of one rank: the activity whose completion a `cudaStreamWaitEvent` made it
    wait for, else -1.

    The producer is the last activity on the recording stream launched before the
    `cudaEventRecord` call (correlation <= the record's); the waiter is the first activity on the
    waiting stream launched after the `cudaStreamWaitEvent` call (correlation > the wait's). Where a
    trace lacks the wait's correlation, the waiter is the first launched at or after the wait's ts.
    Several waits before one activity: the producer that ends last.
    """
    pred = np.full(len(g), -1, np.int64)
    use = (w.lane >= 0) & (w.wait_on_lane >= 0) & (w.wait_on_event_corr >= 0)
    if len(g) == 0 or not use.any():
        return pred
    lane = g.lane.astype(np.int64)
    corr = g.correlation
    has = np.flatnonzero(corr >= 0)
    key = (lane[has] << _LANE_SHIFT) | corr[has]
    order = np.argsort(key, kind="stable")
    key, rows = key[order], has[order]
    w_lane = w.lane[use].astype(np.int64)
    on_lane = w.wait_on_lane[use].astype(np.int64)
    i = np.searchsorted(key, (on_lane << _LANE_SHIFT) | w.wait_on_event_corr[use], side="right") - 1
    ic = np.clip(i, 0, max(len(key) - 1, 0))
    producer = np.where(
        (i >= 0) & (len(key) > 0) & ((key[ic] >> _LANE_SHIFT) == on_lane), rows[ic], -1
    )
    w_corr = w.correlation[use]
    j = np.searchsorted(key, (w_lane << _LANE_SHIFT) | np.maximum(w_corr, 0), side="right")
    jc = np.clip(j, 0, max(len(key) - 1, 0))
    waiter = np.where((j < len(key)) & ((key[jc] >> _LANE_SHIFT) == w_lane), rows[jc], -1)
    missing = np.flatnonzero(w_corr < 0)
    if len(missing):
        waiter[missing] = _waiter_by_time(g, w_lane[missing], w.start_ns[use][missing])
    ok = (producer >= 0) & (waiter >= 0)
    waiter, producer = waiter[ok], producer[ok]
    if len(waiter) == 0:
        return pred
    order = np.lexsort((end_ns[producer], waiter))  # the last per waiter ends latest
    last = np.append(waiter[order][1:] != waiter[order][:-1], True)
    pred[waiter[order][last]] = producer[order][last]
    return pred


def _waiter_by_time(g: GpuActivities, lanes: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """First activity on each lane launched (else started) at or after ts; -1 if none."""
    launch = np.where(g.launch_start_ns >= 0, g.launch_start_ns, g.start_ns)
    out = np.full(len(lanes), -1, np.int64)
    for lane in np.unique(lanes).tolist():  # a loop over lanes, not events
        rows = np.flatnonzero(g.lane == lane)
        order = np.argsort(launch[rows], kind="stable")
        t = launch[rows][order]
        sel = np.flatnonzero(lanes == lane)
        k = np.searchsorted(t, ts[sel], side="left")
        out[sel] = np.where(k < len(t), rows[order][np.clip(k, 0, len(t) - 1)], -1)
    return out


def other_lane_predecessors(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per activity of one rank: the activity on another of its lanes that ends latest at or
    before its start, else -1 (what may have held it back: §7's `event` inferred and `resource`
    edges)."""
    pred = np.full(len(lane), -1, np.int64)
    for k in np.unique(lane).tolist():  # a loop over lanes, not events
        mine = np.flatnonzero(lane == k)
        other = np.flatnonzero(lane != k)
        if len(other) == 0:
            continue
        order = other[np.argsort(end[other], kind="stable")]
        ends = end[order]
        j = np.searchsorted(ends, start[mine], side="right") - 1
        ok = j >= 0
        pred[mine[ok]] = order[j[ok]]
    return pred


def resource_holders(
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    ready: np.ndarray,
    tolerance_ns: int = HELD_TOLERANCE_NS,
) -> np.ndarray:
    """Per activity of one rank: the activity on another of its lanes that held the GPU when it
    could not start, else -1 (metrics.md §7, `resource`).

    The holder is, over the other lanes, the activity that ended last by the activity's start
    plus `tolerance_ns`, having started before it and ended after the activity was ready: a kernel
    whose last blocks were still draining a few µs into the held one counts, a kernel that kept
    running long after it started (it shared the GPU, it did not hold it back) does not.
    """
    n = len(lane)
    best = np.full(n, -1, np.int64)
    best_end = np.full(n, np.iinfo(np.int64).min, np.int64)
    prev = lane_predecessors(lane, start)
    for k in np.unique(lane).tolist():  # a loop over lanes, not events
        on = np.flatnonzero(lane == k)
        on = on[np.argsort(start[on], kind="stable")]
        j = np.searchsorted(start[on], start, side="left") - 1  # the last on lane k to start before
        cand = np.where((j >= 0) & (lane != k), on[np.maximum(j, 0)], -1)
        c = np.maximum(cand, 0)
        # still running well past the start: the one before it on its lane (ended by then)
        cand = np.where((cand >= 0) & (end[c] > start + tolerance_ns), prev[c], cand)
        c = np.maximum(cand, 0)
        better = (cand >= 0) & (end[c] > ready) & (end[c] > best_end)
        best[better], best_end[better] = cand[better], end[c][better]
    return best


def cpu_threads(
    r: RankTrace,
    g: GpuActivities,
    end_ns: np.ndarray,
    shift: int,
    start_ns: np.ndarray | None = None,
) -> tuple[CpuThreads, np.ndarray]:
    """One rank's runtime calls by thread (times less `shift`), and per activity `g` of the rank
    the row of its launch call (-1 where unknown); `end_ns` is their aligned ends."""
    rt, ops = r.runtime, r.cpu_ops
    n = len(rt)
    op_name_id = lookup(ops.external_id, ops.name_id.astype(np.int64), rt.external_id)
    own = np.where(op_name_id >= 0, op_name_id, rt.name_id.astype(np.int64))
    # per distinct symbol id, not per call: its string and whether the call synchronizes
    uniq, inverse = unique_ids(own)
    strings = tuple(r.symbols[k] if k >= 0 else "" for k in uniq.tolist())
    call_ids, call_inverse = unique_ids(rt.name_id)
    sync_name = np.array([k >= 0 and is_sync_call(r.symbols[k]) for k in call_ids.tolist()], bool)
    is_sync = sync_name[call_inverse.ravel()] if n else np.zeros(0, bool)
    start, end = rt.start_ns - shift, rt.end_ns - shift
    # the activity whose end a blocking call waited for: the latest ending inside it
    waited = np.full(n, -1, np.int64)
    if is_sync.any() and len(end_ns):
        order = np.argsort(end_ns, kind="stable")
        ends = end_ns[order]
        j = np.searchsorted(ends, end, side="right") - 1
        jc = np.clip(j, 0, len(ends) - 1)
        inside = is_sync & (j >= 0) & (ends[jc] >= start)
        waited[inside] = order[jc[inside]]
    order = np.lexsort((end, rt.tid))
    rank_of = np.empty(n, np.int64)
    rank_of[order] = np.arange(n)
    tid = rt.tid[order]
    new_thread = np.ones(n, bool)
    if n > 1:
        new_thread[1:] = tid[1:] != tid[:-1]
    bounds = np.append(np.flatnonzero(new_thread), n)
    thread_id = np.cumsum(new_thread) - 1
    lo_of, hi_of = bounds[thread_id], bounds[thread_id + 1]
    sync = waited[order] >= 0  # a blocking call that waited for an activity
    prev_sync = (
        np.maximum.accumulate(np.where(sync, np.arange(n), -1)) if n else np.zeros(0, np.int64)
    )
    prev_sync = np.where(prev_sync >= lo_of, prev_sync, -1)
    threads = CpuThreads(
        start_ns=start[order],
        end_ns=end[order],
        tid=tid,
        op=inverse.ravel()[order] if n else np.zeros(0, np.int64),
        thread_lo=lo_of,
        thread_hi=hi_of,
        prev_sync=prev_sync,
        waited_for=waited[order],
        strings=strings,
    )
    local = lookup(rt.correlation, np.arange(n, dtype=np.int64), g.correlation)
    launch_call = np.where(local >= 0, rank_of[np.maximum(local, 0)] if n else -1, -1)
    launched = np.zeros(n, bool)
    launched[launch_call[launch_call >= 0]] = True
    # §7: a launch whose activity started well after the call returned: the GPU was still busy
    ahead = np.zeros(n, bool)
    if start_ns is None:
        start_ns = g.start_ns - shift
    has = np.flatnonzero(launch_call >= 0)
    ahead[launch_call[has]] = start_ns[has] - threads.end_ns[launch_call[has]] > HELD_TOLERANCE_NS
    prev_ahead = (
        np.maximum.accumulate(np.where(ahead, np.arange(n), -1)) if n else ahead.astype(int)
    )
    prev_ahead = np.where(prev_ahead >= lo_of, prev_ahead, -1)
    did = launched | (threads.waited_for >= 0)
    workers = []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # a loop over threads
        rows = np.flatnonzero(did[lo:hi]) + lo
        if len(rows):
            workers.append((lo, int(tid[lo]), rows, threads.end_ns[rows]))
    threads = dataclasses.replace(
        threads,
        launched=launched,
        prev_ahead=prev_ahead,
        workers=tuple(workers),
        string_objects=_objects(strings),
    )
    return threads, launch_call


def rank_graph(
    acts: RunActivities,
    instance: np.ndarray,
    r: RankTrace,
    pos: int,
    offsets_ns: np.ndarray,
    threads: int = 1,
) -> RankGraph:
    """The graph of the rank at `pos` (metrics.md §7): its activities on the aligned clock and
    the edges within it. With `threads` > 1 the index of its host names is built in a thread
    of its own meanwhile (`beside.at_once`)."""
    shift = int(offsets_ns[pos])
    (graph, issuer_name_id), names = at_once(
        lambda: _rank_edges(acts, instance, r, pos, shift),
        lambda: host_names(r, shift),
        threads,
    )
    issuer_label = None
    if issuer_name_id is not None:
        index = {n: k for k, n in enumerate(names.strings)}
        issuer_label = [
            index.get(r.symbols[k], -1) if k >= 0 else -1 for k in issuer_name_id.tolist()
        ]
    return dataclasses.replace(graph, names=names, issuer_label=issuer_label)


def _rank_edges(
    acts: RunActivities, instance: np.ndarray, r: RankTrace, pos: int, shift: int
) -> tuple[RankGraph, np.ndarray | None]:
    """`rank_graph` but for its host names, and a CPU run's issuing ops' symbol ids (None in
    another run)."""
    lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
    g = r.gpu  # its rows are the table's lo:hi
    start, end = g.start_ns - shift, g.end_ns - shift
    launch_end = np.where(g.launch_end_ns >= 0, g.launch_end_ns - shift, _NONE)
    category = np.zeros(len(g), np.int8)
    for cls, cat in _CATEGORY_OF_CLASS.items():
        category[g.cls == cls] = cat
    w = r.waits
    cpu, launch_call = cpu_threads(r, g, end, shift, start)
    # per activity by start: the one that ends last among those started by then (§7, `launch`)
    by_start = np.argsort(start, kind="stable")
    reach = np.maximum.accumulate(end[by_start]) if len(g) else end
    last_row = (
        by_start[np.maximum.accumulate(np.where(end[by_start] >= reach, np.arange(len(g)), 0))]
        if len(g)
        else by_start
    )
    lane_prev = lane_predecessors(g.lane, start)
    event_pred = stream_wait_predecessors(g, w, end)
    # the ready time without inferred edges: stream predecessor, recorded wait, launch call
    ready = np.where(lane_prev >= 0, end[np.maximum(lane_prev, 0)], _NONE)
    ready = np.maximum(ready, np.where(event_pred >= 0, end[np.maximum(event_pred, 0)], _NONE))
    ready = np.maximum(ready, np.where(launch_end != _NONE, np.minimum(launch_end, start), _NONE))
    waits = cpu_run_waits(r, start, end, lane_prev, shift) if r.cpu_run else None
    graph = RankGraph(
        base=lo,
        start_ns=_ints(start),
        end_ns=_ints(end),
        launch_end_ns=_ints(launch_end),
        launch_call=_ints(launch_call),
        category=_ints(category),
        lane_prev=_ints(lane_prev),
        event_pred=_ints(event_pred),
        other_prev=_ints(other_lane_predecessors(g.lane, start, end)),
        instance=_ints(instance[lo:hi]),
        has_waits=bool(((w.lane >= 0) & (w.wait_on_lane >= 0)).any()),
        cpu=cpu,
        holder=_ints(resource_holders(g.lane, start, end, ready)),
        run_start=_ints(start[by_start]),
        run_last=_ints(last_row),
        cpu_run=r.cpu_run,
        tid=_ints(waits.tid) if waits else None,
        issuer_prev=_ints(waits.issuer_prev) if waits else None,
        issuer_tid=_ints(waits.issuer_tid) if waits else None,
        waited_coll=_ints(waits.waited_coll) if waits else None,
    )
    return graph, waits.issuer_name_id if waits else None


def _ints(values: np.ndarray) -> array.array:
    """`values` as a Python array of int64: its items are read one at a time by the walk, faster
    than a list's (contiguous, no object per item to reach), and a forked walk reading them writes
    nothing to the pages it shares (a list's items would have their reference counts written)."""
    return array.array("q", np.ascontiguousarray(values, np.int64).tobytes())


def path_graph(
    acts: RunActivities,
    match: CollectiveMatch,
    timing: CollectiveTiming,
    offsets_ns: np.ndarray,
    ranks: Sequence[RankTrace],
    threads: int = 1,
) -> PathGraph:
    """The graph the walk follows (metrics.md §7); `threads` as `rank_graph` takes them."""
    return PathGraph(acts, match, timing, offsets_ns, ranks, threads)


class _Segments:
    """Segments appended during a walk (latest first). With `defer`, a CPU stretch's pieces
    (`add_cpu`, which the walk's next move does not depend on) are found apart from the walk and
    put back where they belong among the rest (`arrays`): with `workers` > 1, each time
    EXPAND_MIN_STRETCHES stretches have been deferred they are handed to a process forked then
    (at most `workers - 1` running at once), which finds them while the walk goes on; those left
    at the end are found over forked processes when there are many."""

    def __init__(self, floor: int, defer: bool = False, workers: int = 1) -> None:
        self.floor = floor
        self.rows: list[tuple] = []
        self.defer = defer
        self.deferred: list[tuple[int, tuple]] = []  # (len(rows) when added, add_cpu's arguments)
        self.workers = workers if defer else 1
        self.sent = 0  # the deferred stretches handed to forked processes so far
        self.send_at = EXPAND_MIN_STRETCHES  # deferred stretches at which to hand out the rest
        self.batches: list[ForkedCall] = []  # their processes, in the order of their stretches

    def add(
        self,
        row: int,
        lo: int,
        hi: int,
        category: int,
        edge: int,
        inferred: bool,
        pos: int,
        call: int = -1,
        label: int = -1,
        thread: int = -1,
    ) -> None:
        if lo < self.floor:
            lo = self.floor
        if hi > lo:
            self.rows.append((row, lo, hi, category, edge, inferred, pos, call, label, thread))

    def add_host(
        self,
        names: HostNames,
        tid: int,
        row: int,
        lo: int,
        hi: int,
        edge: int,
        inferred: bool,
        pos: int,
        fallback: int = -1,
    ) -> None:
        """Thread `tid`'s time [lo, hi] as host, cut where its ops and user ranges begin and end,
        each piece named by the innermost one holding it (§7), latest first. A piece that nothing
        holds takes the name `fallback` (index into `names.strings`), else that of `row`."""
        lo = max(lo, self.floor)
        if hi <= lo:
            return
        bounds, label = named_pieces(names, tid, lo, hi)
        if fallback >= 0 and (label < 0).any():
            label = np.where(label < 0, fallback, label)
            keep = np.append(True, label[1:] != label[:-1])
            bounds, label = np.append(bounds[:-1][keep], hi), label[keep]
        self.add_pieces(
            row,
            bounds[:-1],
            bounds[1:],
            HOST,
            edge,
            inferred,
            pos,
            np.full(len(label), -1),
            label,
            tid,
        )

    def add_cpu(
        self,
        cpu: CpuThreads,
        pos: int,
        first: int,
        last: int,
        lo: int,
        hi: int,
        named_by: int,
        names: HostNames | None = None,
        edge: int = CPU,
        inferred: bool = False,
    ) -> None:
        """The host time [lo, hi] on one thread of the rank at `pos`, cut at the ends of its calls
        first..last (each piece named by the op of the call that ends it; the last piece by
        `named_by`) and where the thread's ops and user ranges begin and end (a piece one of them
        holds is named by the innermost: `names`), merged where the same name follows itself.
        Deferred (`defer`): its arguments kept, for `arrays` to give a `_Segments` that does not."""
        if self.defer:
            args = (cpu, pos, first, last, lo, hi, named_by, names, edge, inferred)
            self.deferred.append((len(self.rows), args))
            if self.workers > 1 and len(self.deferred) >= self.send_at:
                self._send()
            return
        lo = max(lo, self.floor)
        if hi <= lo:
            return
        # the calls' ends strictly inside (lo, hi): a slice, a thread's calls being by end
        ends = cpu.end_ns[first : last + 1] if last >= first else _NO_NS
        a, b = int(ends.searchsorted(lo, side="right")), int(ends.searchsorted(hi, side="left"))
        cuts = ends[a:b]
        # per piece: the call that ends it (the last piece's: `named_by`)
        owner = np.empty(max(b - a, 0) + 1, np.int64)
        owner[:-1], owner[-1] = np.arange(first + a, first + max(a, b)), named_by
        tid = int(cpu.tid[named_by])
        if names is not None:  # cut further where the thread's ops and ranges begin and end
            nb, nl = named_pieces(names, tid, lo, hi)
            merged = sorted_unique(np.concatenate((cuts, nb[1:-1])))
            starts, stops = _pieces(lo, merged, hi)
            label = nl[nb.searchsorted(starts, side="right") - 1]
            # a piece's call: the first whose end is at or after the piece's end
            owner = owner[cuts.searchsorted(stops, side="left")]
            call_op = cpu.string_objects[cpu.op[owner]]
            key = np.where(label >= 0, names.string_objects[label], call_op)  # a name, else the op
        else:
            starts, stops = _pieces(lo, cuts, hi)
            label = np.full(len(owner), -1, np.int64)
            key = cpu.string_objects[cpu.op[owner]]
        change = np.empty(len(key), bool)  # keep the last piece of each run of one name
        np.not_equal(key[1:], key[:-1], out=change[:-1])
        change[-1] = True
        last_of = np.flatnonzero(change)
        first_of = np.empty(len(last_of), np.int64)
        first_of[0], first_of[1:] = 0, last_of[:-1] + 1
        self.add_pieces(
            -1,
            starts[first_of],
            stops[last_of],
            HOST,
            edge,
            inferred,
            pos,
            owner[last_of],
            label[last_of],
            tid,
        )

    def add_pieces(
        self,
        row: int,
        lo: np.ndarray,
        hi: np.ndarray,
        category: int,
        edge: int,
        inferred: bool,
        pos: int,
        call: np.ndarray,
        label: np.ndarray,
        thread: int,
    ) -> None:
        """`add` for the pieces of one stretch, given as arrays in time order (added latest
        first, as `add` would one at a time)."""
        lo = np.maximum(lo, self.floor)
        k = np.flatnonzero(hi > lo)[::-1]
        n = len(k)
        self.rows.extend(
            zip(
                itertools.repeat(row, n),
                lo[k].tolist(),
                hi[k].tolist(),
                itertools.repeat(category, n),
                itertools.repeat(edge, n),
                itertools.repeat(inferred, n),
                itertools.repeat(pos, n),
                call[k].tolist(),
                label[k].tolist(),
                itertools.repeat(thread, n),
            )
        )

    def _send(self) -> None:
        """The deferred stretches not yet handed out, to a process forked now, unless
        `workers - 1` are still running (they wait for the next stretch, or for `arrays`)."""
        if sum(not call.done() for call in self.batches) >= self.workers - 1:
            self.send_at = len(self.deferred) + EXPAND_RETRY_STRETCHES  # asked again later
            return
        lo, hi = self.sent, len(self.deferred)
        self.batches.append(ForkedCall(lambda: self._expanded(lo, hi)))
        self.sent, self.send_at = hi, hi + EXPAND_MIN_STRETCHES

    def arrays(self, workers: int = 1) -> PathSegments:
        """The segments as columns; the deferred CPU stretches not handed out yet found now, over
        up to `workers` processes, each at least EXPAND_LAST_MIN_STRETCHES of them, and those
        handed out taken from their processes."""
        a = _row_array(self.rows)
        if self.deferred:
            rest = len(self.deferred) - self.sent
            parts = min(workers, rest // EXPAND_LAST_MIN_STRETCHES) or 1
            bounds = np.linspace(self.sent, len(self.deferred), parts + 1).astype(np.int64)
            bounds = bounds.tolist()
            found = map_forked(lambda k: self._expanded(bounds[k], bounds[k + 1]), parts, parts)
            found = [call.result() for call in self.batches] + found
            self.batches = []
            a = _spliced(
                a,
                np.array([at for at, _ in self.deferred], np.int64),
                np.concatenate([n for n, _ in found]),
                np.concatenate([rows for _, rows in found]),
            )
        return PathSegments(
            a[:, 0],
            a[:, 1],
            a[:, 2],
            a[:, 3].astype(np.int8),
            a[:, 4].astype(np.int8),
            a[:, 5].astype(bool),
            a[:, 6],
            a[:, 7],
            a[:, 8],
            a[:, 9],
        )

    def close(self) -> None:
        """The processes still finding stretches ended (an error left the walk)."""
        for call in self.batches:
            call.close()
        self.batches = []

    def _expanded(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The pieces of deferred stretches lo..hi-1: how many each, and their rows in order."""
        counts = np.zeros(hi - lo, np.int64)
        pieces = _Segments(self.floor)
        for k in range(lo, hi):
            before = len(pieces.rows)
            pieces.add_cpu(*self.deferred[k][1])
            counts[k - lo] = len(pieces.rows) - before
        return counts, _row_array(pieces.rows)


# deferred CPU stretches in each batch handed to a forked process during a walk: on the lent
# 16-core machine one takes about 40 ms there, a fork about 1 ms of the walk's time
EXPAND_MIN_STRETCHES = 400
# where every process is still busy, the deferred stretches after which to look again
EXPAND_RETRY_STRETCHES = 50
# the least share of a forked process in the stretches left at a walk's end (about 10 ms)
EXPAND_LAST_MIN_STRETCHES = 100


def _row_array(rows: list[tuple]) -> np.ndarray:
    """`_Segments` rows (tuples of 10 ints) as an (n, 10) int64 array."""
    return np.fromiter(itertools.chain.from_iterable(rows), np.int64, count=10 * len(rows)).reshape(
        len(rows), 10
    )


def _spliced(
    rows: np.ndarray, at: np.ndarray, counts: np.ndarray, pieces: np.ndarray
) -> np.ndarray:
    """`rows` with each deferred stretch's `counts[i]` rows (consecutive in `pieces`) put in
    before `rows[at[i]]` (`at` ascending; stretches at the same place in the order given)."""
    before = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=before[1:])  # pieces of the stretches before each
    out = np.empty((len(rows) + len(pieces), 10), np.int64)
    # a row moves down by the pieces of every stretch put in at or before it
    out[np.arange(len(rows)) + before[np.searchsorted(at, np.arange(len(rows)), side="right")]] = (
        rows
    )
    # a stretch's pieces start after the rows before it and the pieces of the stretches before
    start = np.repeat(at + before[:-1], counts)
    out[start + np.arange(len(pieces)) - np.repeat(before[:-1], counts)] = pieces
    return out


_NO_NS = np.zeros(0, np.int64)


def _pieces(lo: int, cuts: np.ndarray, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The starts and ends of [lo, hi] cut at `cuts` (sorted, strictly inside)."""
    starts = np.empty(len(cuts) + 1, np.int64)
    stops = np.empty(len(cuts) + 1, np.int64)
    starts[0], starts[1:] = lo, cuts
    stops[:-1], stops[-1] = cuts, hi
    return starts, stops


def walk_step(
    graph: PathGraph,
    last: int,
    floor_ns: int,
    n_in_step: int,
    tolerance_ns: int = HELD_TOLERANCE_NS,
    workers: int = 1,
) -> PathSegments:
    """metrics.md §7: from `last`, the activity that ends last in the step, walk back through what
    each activity waited for, down to `floor_ns` (the step's earliest start over all ranks).

    An activity's own time goes on the path under its class (a matched collective only its
    transfer; its wait is handed to the last rank to arrive). Then the walk asks why it did not
    start earlier: its ready time is the latest of its stream predecessor's end, a recorded stream
    wait's producer's end (or, on ranks without recorded waits, another stream's activity ending
    within `tolerance_ns` before it: `event`, inferred) and its launch call's end. A launch that was
    binding takes the walk onto the CPU thread, back to the synchronization that last made that
    thread wait for the GPU; an activity that started more than `tolerance_ns` after it was ready
    was held back by the other-stream activity that ended last before it started (`resource`, or
    `event` on a rank without recorded waits; inferred).

    Rows are RunActivities rows; the walk reads one rank's graph at a time (`PathGraph.rank`) and
    changes rank only through a collective's last arrival. With `workers` > 1, the pieces of the
    host time on the path are found apart from the walk, by up to that many forked processes
    where the host stretches are many (`_Segments`): during the walk, and after it for the last.
    """
    out = _Segments(int(floor_ns), defer=workers > 1, workers=workers)
    try:
        _walk_into(out, graph, last, floor_ns, n_in_step, tolerance_ns)
        return out.arrays(workers)
    finally:
        out.close()


def _walk_into(
    out: _Segments, graph: PathGraph, last: int, floor_ns: int, n_in_step: int, tolerance_ns: int
) -> None:
    """`walk_step`'s walk, its segments added to `out`."""
    arrival, binding = graph.arrival_ns, graph.binding
    add = out.rows.append  # `out.add` spelled out below: this loop runs once per segment
    floor = int(floor_ns)
    pos = graph.pos_of(int(last))
    g = graph.rank(pos)
    base, s, e, instance, category, lane_prev, event_pred, other_prev, rest = _walked(g)
    launch_end_ns, launch_call, holder, has_waits, cpu_run = rest
    cur, edge, inferred = int(last) - base, END, False  # cur: a row of g
    cursor = e[cur]
    for _ in range(4 * n_in_step + 64):  # a bound against cycles in inconsistent traces
        i = instance[cur]
        # the wait goes to the last to arrive
        if i >= 0 and arrival[i] > s[cur] and binding[i] != base + cur:
            t = arrival[i] if arrival[i] < cursor else cursor
            # the transfer began at the last arrival: its segment names the collective edge
            lo = t if t > floor else floor
            if cursor > lo:
                add((base + cur, lo, cursor, COMM, COLLECTIVE, False, pos, -1, -1, -1))
            pos = graph.pos_of(binding[i])
            g = graph.rank(pos)
            base, s, e, instance, category, lane_prev, event_pred, other_prev, rest = _walked(g)
            launch_end_ns, launch_call, holder, has_waits, cpu_run = rest
            cur, edge, inferred = binding[i] - base, COLLECTIVE, False
            cursor = s[cur] if s[cur] < t else t
        else:
            lo = s[cur] if s[cur] < cursor else cursor
            clamped = lo if lo > floor else floor
            if cursor > clamped:
                add((base + cur, clamped, cursor, category[cur], edge, inferred, pos, -1, -1, -1))
            cursor = lo
        if cursor <= floor:
            break
        if cpu_run:  # a CPU thread's activity: what its thread did, or waited for, before it
            cur, edge, inferred, cursor, more = _cpu_run_step(g, cur, cursor, floor, pos, out)
            if not more:
                break
            continue
        start = s[cur]
        # the ready time and the edge that set it
        ready, why, pred, why_inferred = _NONE, NONE, -1, False
        p, q, h = lane_prev[cur], event_pred[cur], other_prev[cur]
        if p >= 0 and e[p] > ready:
            ready, why, pred = e[p], STREAM, p
        if q >= 0 and e[q] > ready:
            ready, why, pred = e[q], EVENT, q
        elif q < 0 and h >= 0 and not has_waits and start - e[h] <= tolerance_ns and e[h] > ready:
            ready, why, pred, why_inferred = e[h], EVENT, h, True
        launch_end = launch_end_ns[cur]
        if launch_end != _NONE and min(launch_end, start) > ready:
            ready, why, pred = min(launch_end, start), LAUNCH, launch_call[cur]
        hold = holder[cur] if holder is not None else h
        if start - ready > tolerance_ns and hold >= 0 and e[hold] > ready:
            # ready long before it started, while another stream's activity held the GPU (still
            # running as it started, or ending last before): held back by it. A rank whose trace
            # records stream waits names this `resource` (the GPU was busy); without recorded
            # waits an unrecorded event wait is as likely: `event`. Both inferred.
            kind = RESOURCE if has_waits else EVENT
            out.add(base + cur, min(e[hold], cursor), cursor, IDLE, kind, True, pos)
            cursor = min(cursor, e[hold])
            cur, edge, inferred = hold, kind, True
            continue
        if why == NONE:  # nothing explains the time down to the floor
            out.add(base + cur, floor, cursor, IDLE, NONE, False, pos)
            break
        if why != LAUNCH:
            # a few µs of dependency latency belong to the edge; a longer gap nothing explains
            gap_edge = why if start - ready <= tolerance_ns else NONE
            clamped = ready if ready > floor else floor
            if cursor > clamped:
                add(
                    (
                        base + cur,
                        clamped,
                        cursor,
                        IDLE,
                        gap_edge,
                        why_inferred and gap_edge != NONE,
                        pos,
                        -1,
                        -1,
                        -1,
                    )
                )
            if ready < cursor:
                cursor = ready
            cur, edge, inferred = pred, why, why_inferred
            continue
        # the launch was binding: launch latency, then the launching thread back to its last wait
        out.add(base + cur, ready, cursor, HOST, LAUNCH, False, pos)
        cursor = min(cursor, ready)
        call = pred
        if call < 0:  # the launch call is not in the table (no runtime events on that rank)
            out.add(base + cur, floor, cursor, HOST, LAUNCH, False, pos)
            break
        cpu = g.cpu
        cursor, sync, running = _cpu_stretch(
            g, call, cursor, floor, pos, out, tolerance_ns, arrival
        )
        if running >= 0:  # the thread was ahead of the GPU there: the GPU's work is the path
            cur, edge, inferred = running, LAUNCH, True
            continue
        if sync < 0:
            break
        waited = int(cpu.waited_for[sync])
        out.add(-1, e[waited], cursor, HOST, SYNC, True, pos, sync)
        cursor = min(cursor, e[waited])
        cur, edge, inferred = waited, SYNC, True
        if cursor <= floor:
            break


def _walked(g: RankGraph) -> tuple:
    """The lists of a rank's graph that `walk_step` reads at every segment, as locals."""
    return (
        g.base,
        g.start_ns,
        g.end_ns,
        g.instance,
        g.category,
        g.lane_prev,
        g.event_pred,
        g.other_prev,
        (g.launch_end_ns, g.launch_call, g.holder, g.has_waits, g.cpu_run),
    )


def _cpu_stretch(
    g: RankGraph,
    call: int,
    cursor: int,
    floor: int,
    pos: int,
    out: _Segments,
    tolerance_ns: int,
    arrival: list | None = None,
) -> tuple[int, int, int]:
    """metrics.md §7: the host time before runtime call `call` (its thread's calls down to
    `cursor`) back to the synchronization that last made the thread wait for the GPU. Where the
    thread ran nothing for more than `tolerance_ns` before (blocked in `backward()` while the
    autograd engine's thread launched, waiting on a queue), the path leaves it for the other
    thread's launch or synchronization that ended last in that stretch (`thread`, inferred; the
    time after it until the thread ran again is the thread's `host`). Where the thread, later than
    both, launched an activity that started more than `tolerance_ns` after the call returned, it
    was ahead of the GPU: the stretch begins at that call's end, at the GPU activity running then
    (not a collective still waiting for its last rank: `arrival`). Returns the cursor, that
    synchronization's call (-1 when the stretch reaches the floor) and that running activity
    (-1 when the stretch did not begin there)."""
    cpu = g.cpu
    for _ in range(len(cpu) + 1):  # each hand-off moves the cursor back to an earlier call
        lo_t, hi_t = int(cpu.thread_lo[call]), int(cpu.thread_hi[call])
        j = int(cpu.end_ns[lo_t:hi_t].searchsorted(cursor, side="right")) - 1 + lo_t
        sync = int(cpu.prev_sync[j]) if j >= lo_t else -1
        if sync >= 0 and cpu.end_ns[sync] <= floor:
            sync = -1
        stretch_lo = int(cpu.end_ns[sync]) if sync >= 0 else floor
        tid = int(cpu.tid[call])
        # the thread's last launch before that the GPU was not ready for: the GPU's work ran then
        c = int(cpu.prev_ahead[j]) if cpu.prev_ahead is not None and j >= lo_t else -1
        t_ahead = int(cpu.end_ns[c]) if c > sync and c >= lo_t else _NONE
        running = _running_at(g, t_ahead) if t_ahead > max(floor, stretch_lo) else -1
        if running >= 0 and arrival is not None and g.instance[running] >= 0:
            if arrival[g.instance[running]] > t_ahead:  # a collective still waiting: no work
                running = -1
        gap, other = (0, 0), -1
        if g.names is not None:
            gap, other = _handed_to(
                cpu, tid, g.names, *g.names.idle_gaps(tid, stretch_lo, cursor, tolerance_ns)
            )
        if running >= 0 and (other < 0 or t_ahead >= gap[1]):
            out.add_cpu(cpu, pos, c + 1, j, t_ahead, cursor, call, g.names)
            return min(cursor, t_ahead), -1, running
        if other < 0:
            first = sync + 1 if sync >= 0 else lo_t
            out.add_cpu(cpu, pos, first, j, stretch_lo, cursor, call, g.names)
            return min(cursor, stretch_lo), sync, -1
        # the thread's own time after the gap, then its wake-up after the other thread's call
        woke = int(cpu.end_ns[lo_t:hi_t].searchsorted(gap[1], side="right")) + lo_t
        out.add_cpu(cpu, pos, woke, j, gap[1], cursor, call, g.names)
        t = int(cpu.end_ns[other])
        out.add_cpu(cpu, pos, woke, woke - 1, t, gap[1], min(woke, j), g.names, THREAD, True)
        cursor, call = min(cursor, t), other
    return cursor, -1, -1


def _running_at(g: RankGraph, t: int) -> int:
    """The activity of the rank running at `t` (of those started by then, the one that ends last,
    if it ends after `t`), -1."""
    if g.run_start is None:
        return -1
    k = bisect.bisect_right(g.run_start, t) - 1
    if k < 0:
        return -1
    row = g.run_last[k]
    return row if g.end_ns[row] > t else -1


def _handed_to(
    cpu: CpuThreads, tid: int, names: HostNames, froms: np.ndarray, tos: np.ndarray
) -> tuple[tuple[int, int], int]:
    """Of thread `tid`'s idle stretches (froms, tos), the latest in which another thread worked
    (ran CPU ops or runtime calls for at least half of it) and a launch or blocking
    synchronization of that thread ended, and the call of those that ended last in it; -1 if
    none."""
    others = [w for w in cpu.workers if w[1] != tid] if len(tos) else []
    if not others:
        return (0, 0), -1
    best = np.full(len(tos), -1, np.int64)
    best_end = froms.copy()
    for _, other_tid, rows, ends in others:  # a loop over threads
        # ends are sorted: a thread's calls are by end
        k = np.searchsorted(ends, tos, side="left") - 1  # the last to end before the stretch's end
        kc = np.maximum(k, 0)
        worked = 2 * names.busy_ns(other_tid, froms, tos) >= tos - froms
        better = (k >= 0) & (ends[kc] > best_end) & worked
        best[better], best_end[better] = rows[kc][better], ends[kc][better]
    hit = np.flatnonzero(best >= 0)
    if len(hit) == 0:
        return (0, 0), -1
    m = int(hit[-1])
    return (int(froms[m]), int(tos[m])), int(best[m])


def _cpu_run_step(
    g: RankGraph, cur: int, cursor: int, floor: int, pos: int, out: _Segments
) -> tuple[int, int, bool, int, bool]:
    """metrics.md §7 on a CPU run: from activity `cur` (its time on the path down to `cursor`),
    the time before it. A collective waited for the thread that issued it: that thread's time
    since its last activity is host (`thread`, inferred). An activity whose thread issued a
    collective and then waited for it (no activity of the thread until after it ended) waited
    for the collective: the thread's time since is host (waking up, `thread`, inferred). Otherwise
    its thread's time since its previous activity is host (`cpu`). Returns the next activity, the
    edge that reached it and whether inferred, the cursor, and whether the walk goes on."""
    names, e = g.names, g.end_ns
    tid = g.tid[cur]
    waited = g.waited_coll[cur]
    if waited >= 0:
        out.add_host(names, tid, g.base + cur, e[waited], cursor, THREAD, True, pos)
        return waited, THREAD, True, min(cursor, e[waited]), True
    if g.issuer_tid[cur] >= 0:
        prev = g.issuer_prev[cur]
        t = e[prev] if prev >= 0 else floor
        out.add_host(
            names,
            g.issuer_tid[cur],
            g.base + (prev if prev >= 0 else cur),
            t,
            cursor,
            THREAD,
            True,
            pos,
            g.issuer_label[cur],
        )
        return prev, THREAD, True, min(cursor, t), prev >= 0
    prev = g.lane_prev[cur]
    t = e[prev] if prev >= 0 else floor
    out.add_host(names, tid, g.base + cur, t, cursor, CPU, False, pos)
    return prev, STREAM, False, min(cursor, t), prev >= 0


def segment_fields(
    seg: PathSegments, acts: RunActivities, graph: PathGraph, floor_ns: int
) -> tuple[list[tuple[str, MicrosOfNs | Coded]], int]:
    """The segments of one path in time order as the columns of their JSON records (metrics.md
    §7): µs after the step's floor, what kind of time, the edge that put it on the path, whether
    inferred, the rank, where it ran and its name; and how many segments."""
    order = np.argsort(seg.start_ns, kind="stable")
    seg = PathSegments(
        *(
            None if getattr(seg, f) is None else getattr(seg, f)[order]
            for f in PathSegments.__dataclass_fields__
        )
    )
    row, pos = seg.row, seg.rank_pos
    thread = seg.thread if seg.thread is not None else np.full(len(row), -1, np.int64)
    on_gpu = (row >= 0) & (thread < 0)
    lane_labels = np.array(acts.lane_labels + ("",), dtype=object)
    where = lane_labels[np.where(on_gpu, acts.lane[np.maximum(row, 0)], -1)]
    host = np.flatnonzero(~on_gpu)
    if len(host):  # "rank R cpu thread T", written once per (rank, thread) on the path
        tids, tid_code = np.unique(
            np.where(thread >= 0, thread, graph.call_threads(seg))[host], return_inverse=True
        )
        pairs, inverse = np.unique(pos[host] * len(tids) + tid_code.ravel(), return_inverse=True)
        texts = _objects(
            [
                f"rank {acts.rank_ids[k // len(tids)]} cpu thread {tids[k % len(tids)]}"
                for k in pairs.tolist()
            ]
        )
        where[host] = texts[inverse.ravel()]
    name = segment_names(seg, acts, graph)
    fields = [
        ("start_us", MicrosOfNs(seg.start_ns - floor_ns)),
        ("dur_us", MicrosOfNs(seg.end_ns - seg.start_ns)),
        ("kind", Coded(seg.category, CATEGORIES)),
        ("edge", Coded(seg.edge, EDGES)),
        ("inferred", Coded(seg.inferred.astype(np.int64), (False, True))),
        ("rank", Coded(pos, [int(r) for r in acts.rank_ids])),
        ("where", _coded_strings(where)),
        ("name", _coded_strings(name)),
    ]
    return fields, len(row)


def segment_names(seg: PathSegments, acts: RunActivities, graph: PathGraph) -> np.ndarray:
    """Each segment's name (metrics.md §7), an object array: the innermost CPU op or user range
    holding its time, else its activity's name, else the op of the runtime call it led to."""
    row = seg.row
    strings = np.array(acts.strings + ("",), dtype=object)
    name_id = acts.name[np.maximum(row, 0)] if len(acts) else np.zeros(len(row), np.int64)
    name = np.where(
        row >= 0, strings[np.where(name_id >= 0, name_id, len(acts.strings))], graph.call_ops(seg)
    )
    labels = graph.labels(seg)
    return np.where(labels != "", labels, name)


def _coded_strings(values: np.ndarray) -> Coded:
    """An object array of strings as a `Coded` column (the distinct strings in order of first
    appearance; found by a dict, in C)."""
    items = values.tolist()
    index = {v: k for k, v in enumerate(dict.fromkeys(items))}
    codes = np.fromiter(map(index.__getitem__, items), np.int64, len(items))
    return Coded(codes, [str(v) for v in index])


def segment_records(
    seg: PathSegments, acts: RunActivities, graph: PathGraph, floor_ns: int
) -> Records:
    """The segments of one path in time order, as JSON-ready records (`segment_fields`) written
    as a path's segments sit in `tpscope analyze --json` (SEGMENTS_INDENT deep)."""
    return Records(*segment_fields(seg, acts, graph, floor_ns), SEGMENTS_INDENT)


def summarize_path(
    seg: PathSegments,
    acts: RunActivities,
    graph: PathGraph,
    step: int,
    floor_ns: int,
    span_ns: int,
    first_step: bool,
    segments: Records | None = None,
) -> CriticalPath:
    """A CriticalPath from one walk: totals per kind and edge, the host time per CPU op; its
    segments `segment_records` (`segments`, where already made)."""
    dur = (seg.end_ns - seg.start_ns).astype(np.int64)
    length = int(dur.sum())
    totals = np.bincount(seg.category.astype(np.int64), weights=dur, minlength=len(CATEGORIES))
    by_edge = np.bincount(seg.edge.astype(np.int64), weights=dur, minlength=len(EDGES))
    inferred = float(dur[seg.inferred].sum())
    visited = seg.row[seg.row >= 0]
    lanes = np.unique(acts.lane[visited])
    return CriticalPath(
        step=step,
        length_us=length / NS_PER_US,
        **{f"{c}_us": float(t) / NS_PER_US for c, t in zip(CATEGORIES, totals.tolist())},
        exposed_comm_ratio=float(totals[COMM]) / length if length > 0 else None,
        ranks=sorted(int(acts.rank_ids[p]) for p in np.unique(seg.rank_pos).tolist()),
        lanes=[acts.lane_labels[k] for k in lanes.tolist()],
        span_us=span_ns / NS_PER_US,
        inferred_us=inferred / NS_PER_US,
        inferred_share=inferred / length if length > 0 else None,
        edge_us={EDGES[k]: float(v) / NS_PER_US for k, v in enumerate(by_edge.tolist()) if v > 0},
        host_ops_us=_host_ops(seg, dur, graph),
        first_step=first_step,
        segments=segment_records(seg, acts, graph, floor_ns) if segments is None else segments,
    )


def _host_ops(seg: PathSegments, dur: np.ndarray, graph: PathGraph) -> dict[str, float]:
    """The host time on the path per name (the innermost CPU op or user range holding it, else
    the op of the call it led to) in µs, the largest first (at most 10; a tie goes to the name
    seen first, by rank and then by name)."""
    own = (seg.category == HOST) & ((seg.edge == CPU) | (seg.edge == THREAD))
    mine = np.flatnonzero(
        own & ((seg.row < 0) | (seg.thread >= 0 if seg.thread is not None else False))
    )
    labels = graph.labels(seg)[mine]
    ops = graph.call_ops(seg)[mine]
    acts = graph.acts
    own_name = _objects(acts.strings)[acts.name[seg.row[mine]]] if len(acts) else ops
    names = np.where(labels != "", labels, np.where(seg.call[mine] >= 0, ops, own_name))
    coded = _coded_strings(names)  # each name's number, in the order first seen
    code, index = coded.codes, coded.values
    # per name: its time (whole ns, so the float sums are exact in any order) and first rank
    sums = np.bincount(code, weights=dur[mine].astype(np.float64), minlength=len(index))
    lowest = np.full(len(index), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(lowest, code, seg.rank_pos[mine].astype(np.int64))
    total = dict(zip(index, sums.tolist()))
    first = dict(zip(index, lowest.tolist()))
    ranked = sorted(total, key=lambda n: (-total[n], first[n], n))[:10]
    return {n: total[n] / NS_PER_US for n in ranked if total[n] > 0}


def step_plan(
    acts: RunActivities, graph: PathGraph, windows: list | None = None
) -> list[tuple[int, int, int, int, int]]:
    """(step, floor, top, last, activities) of every step number present on any rank: where its
    walk starts (`last`, the activity that ends last) and stops (`floor`).

    With `windows` (each rank's StepWindows, by rank position: metrics.md §3's partition), a
    step's path runs over the union of its ranks' windows, aligned: from the earliest window start
    to the latest window end, so that a step's path covers its period, as its step time does, and
    never the previous step's work. Without, from the step's earliest activity start."""
    steps = np.unique(acts.step[acts.step >= 0]) if len(acts) else np.zeros(0, np.int64)
    out = []
    for step in steps.tolist():  # one scan per step number, never a copy of every row
        rows = np.flatnonzero(acts.step == step)
        shift = graph.offsets_ns[acts.rank_pos[rows]]
        start, end = acts.start_ns[rows] - shift, acts.end_ns[rows] - shift  # aligned
        floor, top = int(start.min()), int(end.max())
        if windows is not None:  # §3: the step's period, not the span of the work it launched
            floor = window_floor(step, windows, graph.offsets_ns, floor, top)
        out.append((int(step), floor, top, int(rows[np.argmax(end)]), len(rows)))
    return out


def step_walks(
    acts: RunActivities, graph: PathGraph, windows: list | None = None
) -> list[tuple[int, int, int, PathSegments]]:
    """(step, floor, top, segments) of every step number present on any rank (`step_plan`)."""
    return [
        (step, floor, top, walk_step(graph, last, floor, n))
        for step, floor, top, last, n in step_plan(acts, graph, windows)
    ]


def window_floor(
    step: int, windows: list, offsets_ns: np.ndarray, span_floor: int, top: int
) -> int:
    """The earliest aligned start of `step`'s window over the ranks that have it (§3), at most
    `top`: where the walk of its path stops; `span_floor` (the step's earliest activity) where no
    rank has a window of that number."""
    starts = [
        int(w.start_ns[k]) - int(offsets_ns[pos])
        for pos, w in enumerate(windows)
        if w is not None
        for k in np.flatnonzero(w.step == step)[:1].tolist()
    ]
    return min(min(starts), top) if starts else span_floor


# activities in a run's steps and runtime calls on the ranks where their walks start from which
# the walks run in worker processes: below, forking costs more than it saves
PARALLEL_MIN_ACTIVITIES = 50_000
# workers from which the walks fork: on two cores they gained nothing (docs/benchmarks.md)
PARALLEL_MIN_WORKERS = 3
# a path's segments written as JSON in at most this many forked processes at once, each at
# least TEXT_PART_MIN_SEGMENTS of them: a fork costs about what writing ~10k segments does
TEXT_PARTS_MAX = 4
TEXT_PART_MIN_SEGMENTS = 10_000


def critical_paths(
    acts: RunActivities, graph: PathGraph, windows: list | None = None, workers: int = 1
) -> list[CriticalPath]:
    """One CriticalPath per step number present on any rank; the first profiled step is marked.
    `windows`: each rank's step windows (metrics.md §3), as `step_plan` takes them; `workers` as
    `CriticalPaths` takes them."""
    with CriticalPaths(acts, graph, windows, workers) as paths:
        return paths.results()


class CriticalPaths:
    """The critical paths of a run's steps (`critical_paths`), begun when made, so that the
    caller can compute other metrics while forked workers walk them; `results()` gathers them.

    With at least PARALLEL_MIN_WORKERS workers and at least PARALLEL_MIN_ACTIVITIES activities
    in the steps and runtime calls on the ranks where their walks start, the steps (independent
    walks) are walked in `workers` processes (`Forked`), forked after the graphs of the ranks
    where the walks start are built here (shared copy-on-write, never sent). The workers left
    over (`workers` // steps per step) find a walk's host stretches while it goes on
    (`walk_step`), and (at most TEXT_PARTS_MAX per step) write a slice of its segments as JSON
    each, into memory this process reads (`SharedTexts`): a path comes back with its segments as
    columns (`Records`) and their text. A single step is walked here, its stretches and text
    over forked processes the same way. Otherwise the steps are walked here, in `results()`."""

    def __init__(
        self, acts: RunActivities, graph: PathGraph, windows: list | None, workers: int
    ) -> None:
        plan = step_plan(acts, graph, windows)
        first = plan[0][0] if len(plan) > 1 else None
        self._forked: Forked | None = None
        self._texts: SharedTexts | None = None
        starts = sorted({graph.pos_of(item[3]) for item in plan})
        work = sum(p[4] for p in plan) + sum(len(graph.ranks[pos].runtime) for pos in starts)
        if workers < PARALLEL_MIN_WORKERS or work < PARALLEL_MIN_ACTIVITIES:
            self._walk = lambda: [_step_path(acts, graph, item, first) for item in plan]
            return
        per_step = max(1, workers // len(plan)) if plan else 1
        share = min(per_step, TEXT_PARTS_MAX)
        self._texts = SharedTexts(len(plan) * share)
        slots = [range(k * share, (k + 1) * share) for k in range(len(plan))]
        if len(plan) == 1:
            self._walk = lambda: [
                _written_path(acts, graph, plan[0], first, self._texts, slots[0], per_step)
            ]
            return
        for pos in starts:  # built once, shared
            graph.rank(pos)
        texts = self._texts
        self._forked = Forked(
            lambda k: _written_path(acts, graph, plan[k], first, texts, slots[k], per_step),
            len(plan),
            workers,
        )

    def results(self) -> list[CriticalPath]:
        found = self._walk() if self._forked is None else self._forked.results()
        if self._texts is None:
            return [p for p in found if p is not None]
        return [
            dataclasses.replace(
                path,
                segments=Records(
                    path.segments.fields,
                    path.segments.n,
                    SEGMENTS_INDENT,
                    self._texts.read(slots[0])
                    if whole  # else the slices' texts, joined only with the whole document
                    else records_enclosed([self._texts.read(k) for k in slots], SEGMENTS_INDENT),
                ),
            )
            for path, whole, slots in filter(None, found)
        ]

    def __enter__(self) -> CriticalPaths:
        return self

    def __exit__(self, *exc) -> None:
        if self._forked is not None:
            self._forked.close()
        if self._texts is not None:
            self._texts.close()


def _step_path(
    acts: RunActivities, graph: PathGraph, item: tuple, first: int | None, workers: int = 1
) -> CriticalPath | None:
    """The CriticalPath of one `step_plan` item (`walk_step` given `workers`); None where the
    walk found nothing."""
    step, floor, top, last, n = item
    seg = walk_step(graph, last, floor, n, workers=workers)
    if not len(seg):
        return None
    return summarize_path(seg, acts, graph, step, floor, top - floor, step == first)


def _written_path(
    acts: RunActivities,
    graph: PathGraph,
    item: tuple,
    first: int | None,
    texts: SharedTexts,
    slots: range,
    workers: int,
) -> tuple[CriticalPath, bool, range] | None:
    """`_step_path` over `workers` processes, its segments' JSON written into `texts`: in
    `slots`, one slice of the segments each (by processes forked here as soon as the segments'
    columns are made, while this one sums the path), or the whole text in the first (True with
    it) where the segments are too few to cut or cannot be cut (`jsonable.in_parts`)."""
    step, floor, top, last, n = item
    seg = walk_step(graph, last, floor, n, workers=workers)
    if not len(seg):
        return None
    records = segment_records(seg, acts, graph, floor)

    def summed() -> CriticalPath:
        return summarize_path(seg, acts, graph, step, floor, top - floor, step == first, records)

    parts = min(len(slots), records.n // TEXT_PART_MIN_SEGMENTS)
    if parts < 2 or not in_parts(records.fields):
        path = summed()
        texts.write(slots[0], records.text)
        return path, True, slots
    bounds = np.linspace(0, records.n, parts + 1).astype(np.int64).tolist()

    def write(k: int) -> None:
        lo, hi = bounds[k], bounds[k + 1]
        body = records_body(sliced(records.fields, lo, hi), hi - lo, SEGMENTS_INDENT)
        texts.write(slots[k], body)

    with Forked(write, parts, parts) as writing:  # the slices written while the path is summed
        path = summed()
        writing.results()
    return path, False, slots[:parts]


__all__ = [
    "CATEGORIES",
    "EDGES",
    "CriticalPath",
    "CriticalPaths",
    "PathGraph",
    "PathSegments",
    "critical_paths",
    "path_graph",
    "walk_step",
]
