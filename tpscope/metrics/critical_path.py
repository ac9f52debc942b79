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

import dataclasses
from dataclasses import dataclass

import numpy as np

from tpscope.metrics.activities import NS_PER_US, RunActivities, aligned
from tpscope.metrics.collectives import CollectiveMatch, CollectiveTiming
from tpscope.trace import ActivityClass, RankTrace, StreamWaits
from tpscope.trace.columns import lookup

CATEGORIES = ("compute", "comm", "memory", "host", "idle")
COMPUTE, COMM, MEMORY, HOST, IDLE = range(5)
# metrics.md §7: the edge that put each segment on the path. `end` marks the activity the walk
# starts from (the latest end of the step); `none` a gap that no edge in the trace explains.
EDGES = ("end", "stream", "launch", "cpu", "sync", "event", "collective", "resource", "none")
END, STREAM, LAUNCH, CPU, SYNC, EVENT, COLLECTIVE, RESOURCE, NONE = range(len(EDGES))
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
    segments: list[dict] | None = None


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

    def __len__(self) -> int:
        return len(self.row)


@dataclass(frozen=True, slots=True)
class CpuThreads:
    """Every rank's CUDA runtime calls, run-wide, ordered by (rank, thread, end): one thread's calls
    are contiguous (`thread_lo`, `thread_hi` per call), on the aligned clock."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    rank_pos: np.ndarray
    tid: np.ndarray
    op: np.ndarray  # run-wide string id of the CPU op that made the call (else the call's name)
    thread_lo: np.ndarray
    thread_hi: np.ndarray
    # the latest blocking synchronization at or before this call on its thread, -1
    prev_sync: np.ndarray
    waited_for: np.ndarray  # per call: the activity row whose end a blocking sync waited for, -1
    strings: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class PathGraph:
    """Aligned times and predecessor arrays over every RunActivities row."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    launch_end_ns: np.ndarray  # _NONE where unknown
    launch_call: np.ndarray  # CpuThreads row of the launch call, -1 where unknown
    category: np.ndarray
    lane_prev: np.ndarray  # -1: first on its lane
    event_pred: np.ndarray  # producer of a recorded cudaStreamWaitEvent, else -1
    other_prev: np.ndarray  # latest-ending activity on another lane of the rank ending by its start
    rank_has_waits: np.ndarray  # per row: its rank's trace records stream waits
    rank_pos: np.ndarray
    instance: np.ndarray
    arrival_ns: np.ndarray  # per instance
    binding: np.ndarray  # per instance
    cpu: CpuThreads


def lane_predecessors(lane: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per row: the row before it on its lane in start order, else -1."""
    order = np.lexsort((start, lane))
    prev = np.full(len(lane), -1, np.int64)
    if len(order) > 1:
        same = lane[order][1:] == lane[order][:-1]
        prev[order[1:][same]] = order[:-1][same]
    return prev


def stream_wait_predecessors(
    acts: RunActivities, waits: list[StreamWaits], lane_base: np.ndarray, end_ns: np.ndarray
) -> np.ndarray:
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
        i = (
            np.searchsorted(key, (on_lane << _LANE_SHIFT) | w.wait_on_event_corr[use], side="right")
            - 1
        )
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
            waiter[missing] = _waiter_by_time(
                acts, lo, hi, w_lane[missing], w.start_ns[use][missing]
            )
        ok = (producer >= 0) & (waiter >= 0)
        waiters_all.append(waiter[ok] + lo)
        producers_all.append(producer[ok] + lo)
    if not waiters_all:
        return pred
    waiter, producer = np.concatenate(waiters_all), np.concatenate(producers_all)
    if len(waiter) == 0:
        return pred
    order = np.lexsort((end_ns[producer], waiter))  # the last per waiter ends latest
    last = np.append(waiter[order][1:] != waiter[order][:-1], True)
    pred[waiter[order][last]] = producer[order][last]
    return pred


def _waiter_by_time(
    acts: RunActivities, lo: int, hi: int, lanes: np.ndarray, ts: np.ndarray
) -> np.ndarray:
    """First activity on each lane launched (else started) at or after ts; -1 if none."""
    launch = np.where(
        acts.launch_start_ns[lo:hi] >= 0, acts.launch_start_ns[lo:hi], acts.start_ns[lo:hi]
    )
    out = np.full(len(lanes), -1, np.int64)
    for lane in np.unique(lanes).tolist():  # a loop over lanes, not events
        rows = np.flatnonzero(acts.lane[lo:hi] == lane)
        order = np.argsort(launch[rows], kind="stable")
        t = launch[rows][order]
        sel = np.flatnonzero(lanes == lane)
        k = np.searchsorted(t, ts[sel], side="left")
        out[sel] = np.where(k < len(t), rows[order][np.clip(k, 0, len(t) - 1)], -1)
    return out


def other_lane_predecessors(acts: RunActivities, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row: the activity on another lane of the same rank that ends latest at or before its
    start, else -1 (what may have held it back: §7's `event` inferred and `resource` edges)."""
    pred = np.full(len(acts), -1, np.int64)
    for pos in range(len(acts.rank_ids)):  # a loop over ranks and lanes, not events
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        lane = acts.lane[lo:hi]
        for k in np.unique(lane).tolist():
            mine = np.flatnonzero(lane == k)
            other = np.flatnonzero(lane != k)
            if len(other) == 0:
                continue
            order = other[np.argsort(end[lo:hi][other], kind="stable")]
            ends = end[lo:hi][order]
            j = np.searchsorted(ends, start[lo:hi][mine], side="right") - 1
            ok = j >= 0
            pred[lo + mine[ok]] = lo + order[j[ok]]
    return pred


def cpu_threads(
    acts: RunActivities, ranks: list[RankTrace], offsets_ns: np.ndarray, end_ns: np.ndarray
) -> tuple[CpuThreads, np.ndarray]:
    """The run-wide table of runtime calls by thread, and per activity the row of its launch call."""
    strings: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {
        k: [] for k in ("start", "end", "pos", "tid", "op", "waited")
    }
    launch_local: list[np.ndarray] = []
    base = 0
    bases = []
    for pos, r in enumerate(ranks):
        rt, ops = r.runtime, r.cpu_ops
        n = len(rt)
        op_name_id = lookup(ops.external_id, ops.name_id.astype(np.int64), rt.external_id)
        own = np.where(op_name_id >= 0, op_name_id, rt.name_id.astype(np.int64))
        # per distinct symbol id, not per call: the run-wide string id and whether it synchronizes
        uniq, inverse = np.unique(own, return_inverse=True)
        ids = np.array(
            [
                strings.setdefault(r.symbols[k] if k >= 0 else "", len(strings))
                for k in uniq.tolist()
            ],
            np.int64,
        )
        call_ids, call_inverse = np.unique(rt.name_id, return_inverse=True)
        sync_name = np.array(
            [k >= 0 and is_sync_call(r.symbols[k]) for k in call_ids.tolist()], bool
        )
        is_sync = sync_name[call_inverse.ravel()] if n else np.zeros(0, bool)
        shift = int(offsets_ns[pos])
        start, end = rt.start_ns - shift, rt.end_ns - shift
        # the activity of this rank whose end a blocking call waited for: the latest ending inside it
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        waited = np.full(n, -1, np.int64)
        if is_sync.any() and hi > lo:
            order = np.argsort(end_ns[lo:hi], kind="stable")
            ends = end_ns[lo:hi][order]
            j = np.searchsorted(ends, end, side="right") - 1
            jc = np.clip(j, 0, len(ends) - 1)
            inside = is_sync & (j >= 0) & (ends[jc] >= start)
            waited[inside] = lo + order[jc[inside]]
        for k, v in (
            ("start", start),
            ("end", end),
            ("pos", np.full(n, pos, np.int64)),
            ("tid", rt.tid),
            ("op", ids[inverse.ravel()] if n else np.zeros(0, np.int64)),
            ("waited", waited),
        ):
            parts[k].append(v)
        launch_local.append(
            lookup(rt.correlation, np.arange(n, dtype=np.int64), acts.correlation[lo:hi])
        )
        bases.append(base)
        base += n
    cat = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in parts.items()}
    order = np.lexsort((cat["end"], cat["tid"], cat["pos"]))
    rank_of = np.empty(len(order), np.int64)
    rank_of[order] = np.arange(len(order))
    pos, tid = cat["pos"][order], cat["tid"][order]
    new_thread = np.ones(len(order), bool)
    if len(order) > 1:
        new_thread[1:] = (pos[1:] != pos[:-1]) | (tid[1:] != tid[:-1])
    starts = np.flatnonzero(new_thread)
    thread_id = np.cumsum(new_thread) - 1
    bounds = np.append(starts, len(order))
    lo_of, hi_of = bounds[thread_id], bounds[thread_id + 1]
    sync = cat["waited"][order] >= 0  # a blocking call that waited for an activity
    prev_sync = (
        np.maximum.accumulate(np.where(sync, np.arange(len(order)), -1))
        if len(order)
        else np.zeros(0, np.int64)
    )
    prev_sync = np.where(prev_sync >= lo_of, prev_sync, -1)
    threads = CpuThreads(
        start_ns=cat["start"][order],
        end_ns=cat["end"][order],
        rank_pos=pos,
        tid=tid,
        op=cat["op"][order],
        thread_lo=lo_of,
        thread_hi=hi_of,
        prev_sync=prev_sync,
        waited_for=cat["waited"][order],
        strings=tuple(sorted(strings, key=strings.get)),
    )
    launch_call = np.full(len(acts), -1, np.int64)
    for pos, (local, b) in enumerate(zip(launch_local, bases)):
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        launch_call[lo:hi] = np.where(
            local >= 0, rank_of[np.maximum(local, 0) + b] if len(rank_of) else -1, -1
        )
    return threads, launch_call


def path_graph(
    acts: RunActivities,
    match: CollectiveMatch,
    timing: CollectiveTiming,
    offsets_ns: np.ndarray,
    ranks: list[RankTrace],
) -> PathGraph:
    """Aligned times and the edges the walk follows (metrics.md §7)."""
    start, end = aligned(acts, offsets_ns)
    launch_end = np.where(
        acts.launch_end_ns >= 0, acts.launch_end_ns - offsets_ns[acts.rank_pos], _NONE
    )
    category = np.zeros(len(acts), np.int8)
    for cls, cat in _CATEGORY_OF_CLASS.items():
        category[acts.cls == cls] = cat
    lane_counts = [len(r.lanes) for r in ranks]
    lane_base = np.concatenate([[0], np.cumsum(lane_counts)]).astype(np.int64)
    waits = [r.waits for r in ranks]
    has_waits = np.array([bool(((w.lane >= 0) & (w.wait_on_lane >= 0)).any()) for w in waits], bool)
    cpu, launch_call = cpu_threads(acts, ranks, offsets_ns, end)
    return PathGraph(
        start_ns=start,
        end_ns=end,
        launch_end_ns=launch_end,
        launch_call=launch_call,
        category=category,
        lane_prev=lane_predecessors(acts.lane, start),
        event_pred=stream_wait_predecessors(acts, waits, lane_base, end),
        other_prev=other_lane_predecessors(acts, start, end),
        rank_has_waits=has_waits[acts.rank_pos] if len(acts) else np.zeros(0, bool),
        rank_pos=acts.rank_pos,
        instance=match.instance,
        arrival_ns=timing.arrival_ns,
        binding=timing.binding,
        cpu=cpu,
    )


class _Segments:
    """Segments appended during a walk (latest first)."""

    def __init__(self, floor: int) -> None:
        self.floor = floor
        self.rows: list[tuple] = []

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
    ) -> None:
        if lo < self.floor:
            lo = self.floor
        if hi > lo:
            self.rows.append((row, lo, hi, category, edge, inferred, pos, call))

    def add_cpu(
        self, cpu: CpuThreads, first: int, last: int, lo: int, hi: int, named_by: int
    ) -> None:
        """The host time [lo, hi] on one thread, cut at the ends of its calls first..last (each piece
        named by the op of the call that ends it; the last piece by `named_by`), merged where the
        same op follows itself."""
        lo = max(lo, self.floor)
        if hi <= lo:
            return
        cuts = cpu.end_ns[first : last + 1] if last >= first else np.zeros(0, np.int64)
        keep = (cuts > lo) & (cuts < hi)
        cuts, calls = (
            cuts[keep],
            np.arange(first, last + 1)[keep] if last >= first else np.zeros(0, np.int64),
        )
        bounds = np.concatenate([[lo], cuts, [hi]])
        owner = np.append(calls, named_by)
        ops = cpu.op[owner]
        change = np.append(ops[1:] != ops[:-1], True)  # keep the last piece of each run of one op
        run_start = np.concatenate([[0], np.flatnonzero(change)[:-1] + 1])
        ends = np.flatnonzero(change)
        pos = int(cpu.rank_pos[named_by])
        for a, b in zip(run_start[::-1].tolist(), ends[::-1].tolist()):  # latest first
            self.add(-1, int(bounds[a]), int(bounds[b + 1]), HOST, CPU, False, pos, int(owner[b]))

    def arrays(self) -> PathSegments:
        a = np.array(self.rows, np.int64).reshape(len(self.rows), 8)
        return PathSegments(
            a[:, 0],
            a[:, 1],
            a[:, 2],
            a[:, 3].astype(np.int8),
            a[:, 4].astype(np.int8),
            a[:, 5].astype(bool),
            a[:, 6],
            a[:, 7],
        )


def walk_step(
    graph: PathGraph,
    last: int,
    floor_ns: int,
    n_in_step: int,
    tolerance_ns: int = HELD_TOLERANCE_NS,
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
    """
    g = graph
    s, e, launch_end, cat = g.start_ns, g.end_ns, g.launch_end_ns, g.category
    cpu = g.cpu
    out = _Segments(int(floor_ns))
    floor = int(floor_ns)
    cur, edge, inferred = int(last), END, False
    cursor = int(e[cur])
    for _ in range(4 * n_in_step + 64):  # a bound against cycles in inconsistent traces
        pos = int(g.rank_pos[cur])
        i = g.instance[cur]
        # the wait goes to the last to arrive
        if i >= 0 and g.arrival_ns[i] > s[cur] and g.binding[i] != cur:
            t = min(int(g.arrival_ns[i]), cursor)
            # the transfer began at the last arrival: its segment names the collective edge
            out.add(cur, t, cursor, COMM, COLLECTIVE, False, pos)
            cur, edge, inferred = int(g.binding[i]), COLLECTIVE, False
            cursor = min(int(s[cur]), t)
            pos = int(g.rank_pos[cur])
        else:
            lo = min(int(s[cur]), cursor)
            out.add(cur, lo, cursor, int(cat[cur]), edge, inferred, pos)
            cursor = lo
        if cursor <= floor:
            break
        start = int(s[cur])
        # the ready time and the edge that set it
        ready, why, pred, why_inferred = _NONE, NONE, -1, False
        p, q, h = int(g.lane_prev[cur]), int(g.event_pred[cur]), int(g.other_prev[cur])
        if p >= 0 and e[p] > ready:
            ready, why, pred = int(e[p]), STREAM, p
        if q >= 0 and e[q] > ready:
            ready, why, pred = int(e[q]), EVENT, q
        elif (
            q < 0
            and h >= 0
            and not g.rank_has_waits[cur]
            and start - e[h] <= tolerance_ns
            and e[h] > ready
        ):
            ready, why, pred, why_inferred = int(e[h]), EVENT, h, True
        if launch_end[cur] != _NONE and min(int(launch_end[cur]), start) > ready:
            ready, why, pred = min(int(launch_end[cur]), start), LAUNCH, int(g.launch_call[cur])
        if start - ready > tolerance_ns and h >= 0 and e[h] > ready:
            # ready long before it started, while another stream's activity ran on: held back by
            # it. A rank whose trace records stream waits names this `resource` (the GPU was busy);
            # without recorded waits an unrecorded event wait is as likely: `event`. Both inferred.
            kind = RESOURCE if g.rank_has_waits[cur] else EVENT
            out.add(cur, int(e[h]), cursor, IDLE, kind, True, pos)
            cursor = min(cursor, int(e[h]))
            cur, edge, inferred = h, kind, True
            continue
        if why == NONE:  # nothing explains the time down to the floor
            out.add(cur, floor, cursor, IDLE, NONE, False, pos)
            break
        if why != LAUNCH:
            # a few µs of dependency latency belong to the edge; a longer gap nothing explains
            gap_edge = why if start - ready <= tolerance_ns else NONE
            out.add(cur, ready, cursor, IDLE, gap_edge, why_inferred and gap_edge != NONE, pos)
            cursor = min(cursor, ready)
            cur, edge, inferred = pred, why, why_inferred
            continue
        # the launch was binding: launch latency, then the launching thread back to its last wait
        out.add(cur, ready, cursor, HOST, LAUNCH, False, pos)
        cursor = min(cursor, ready)
        call = pred
        if call < 0:  # the launch call is not in the table (no runtime events on that rank)
            out.add(cur, floor, cursor, HOST, LAUNCH, False, pos)
            break
        lo_t = int(cpu.thread_lo[call])
        j = (
            int(np.searchsorted(cpu.end_ns[lo_t : int(cpu.thread_hi[call])], cursor, side="right"))
            - 1
            + lo_t
        )
        sync = int(cpu.prev_sync[j]) if j >= lo_t else -1
        if sync >= 0 and cpu.end_ns[sync] <= floor:
            sync = -1
        stretch_lo = int(cpu.end_ns[sync]) if sync >= 0 else floor
        out.add_cpu(cpu, sync + 1 if sync >= 0 else lo_t, j, stretch_lo, cursor, call)
        cursor = min(cursor, stretch_lo)
        if sync < 0:
            break
        waited = int(cpu.waited_for[sync])
        out.add(-1, int(e[waited]), cursor, HOST, SYNC, True, pos, sync)
        cursor = min(cursor, int(e[waited]))
        cur, edge, inferred = waited, SYNC, True
        if cursor <= floor:
            break
    return out.arrays()


def segment_records(
    seg: PathSegments, acts: RunActivities, graph: PathGraph, floor_ns: int, names: np.ndarray
) -> list[dict]:
    """The segments of one path in time order, as JSON-ready records (metrics.md §7): µs after the
    step's floor, what kind of time, the edge that put it on the path, where it ran and its name."""
    order = np.argsort(seg.start_ns, kind="stable")
    row, call, pos = seg.row[order], seg.call[order], seg.rank_pos[order]
    cpu = graph.cpu
    on_gpu = row >= 0
    lane_labels = np.array(acts.lane_labels + ("",), dtype=object)
    rank_ids = np.array(acts.rank_ids, np.int64)[pos]
    safe_call = np.maximum(call, 0)
    where = np.where(
        on_gpu,
        lane_labels[np.where(on_gpu, acts.lane[np.maximum(row, 0)], -1)],
        np.char.add(
            np.char.add("rank ", rank_ids.astype(str)),
            np.char.add(" cpu thread ", cpu.tid[safe_call].astype(str)) if len(cpu) else "",
        ),
    )
    op_names = np.array(cpu.strings + ("",), dtype=object)
    name = np.where(
        on_gpu,
        names[np.maximum(row, 0)] if len(names) else "",
        op_names[np.where(call >= 0, cpu.op[safe_call] if len(cpu) else -1, -1)],
    )
    start = ((seg.start_ns[order] - floor_ns) / NS_PER_US).tolist()
    dur = ((seg.end_ns[order] - seg.start_ns[order]) / NS_PER_US).tolist()
    kinds = np.array(CATEGORIES, dtype=object)[seg.category[order]].tolist()
    edges = np.array(EDGES, dtype=object)[seg.edge[order]].tolist()
    return [
        {
            "start_us": a,
            "dur_us": d,
            "kind": k,
            "edge": ed,
            "inferred": i,
            "rank": rk,
            "where": str(w),
            "name": str(nm),
        }
        for a, d, k, ed, i, rk, w, nm in zip(
            start,
            dur,
            kinds,
            edges,
            seg.inferred[order].tolist(),
            rank_ids.tolist(),
            where.tolist(),
            name.tolist(),
        )
    ]


def summarize_path(
    seg: PathSegments,
    acts: RunActivities,
    graph: PathGraph,
    step: int,
    floor_ns: int,
    span_ns: int,
    names: list[str],
    first_step: bool,
) -> CriticalPath:
    """A CriticalPath from one walk: totals per kind and edge, the host time per CPU op."""
    dur = (seg.end_ns - seg.start_ns).astype(np.int64)
    length = int(dur.sum())
    totals = np.bincount(seg.category.astype(np.int64), weights=dur, minlength=len(CATEGORIES))
    by_edge = np.bincount(seg.edge.astype(np.int64), weights=dur, minlength=len(EDGES))
    inferred = float(dur[seg.inferred].sum())
    cpu_rows = np.flatnonzero((seg.row < 0) & (seg.edge == CPU))
    host_ops: dict[str, float] = {}
    if len(cpu_rows):
        ops = graph.cpu.op[seg.call[cpu_rows]]
        per_op = np.bincount(ops, weights=dur[cpu_rows])
        for k in np.argsort(-per_op, kind="stable")[:10].tolist():
            if per_op[k] > 0:
                host_ops[graph.cpu.strings[k]] = float(per_op[k]) / NS_PER_US
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
        host_ops_us=host_ops,
        first_step=first_step,
        segments=segment_records(seg, acts, graph, floor_ns, names),
    )


def activity_names(acts: RunActivities, ranks: list[RankTrace]) -> np.ndarray:
    """Per activity row: its name (an object array)."""
    out = np.empty(len(acts), dtype=object)
    for pos, r in enumerate(ranks):
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        sym = np.array(r.symbols + ("",), dtype=object)
        ids = r.gpu.name_id[acts.row[lo:hi]]
        out[lo:hi] = sym[np.where(ids >= 0, ids, len(r.symbols))]
    return out


def step_walks(acts: RunActivities, graph: PathGraph) -> list[tuple[int, int, int, PathSegments]]:
    """(step, floor, top, segments) of every step number present on any rank."""
    rows = np.flatnonzero(acts.step >= 0)
    if len(rows) == 0:
        return []
    rows = rows[np.argsort(acts.step[rows], kind="stable")]  # grouped by step, once
    steps, first, counts = np.unique(acts.step[rows], return_index=True, return_counts=True)
    floor = np.minimum.reduceat(graph.start_ns[rows], first)
    top = np.maximum.reduceat(graph.end_ns[rows], first)
    # the walk indexes single elements: Python lists do that several times faster than arrays
    as_lists = dataclasses.replace(graph, **{f: getattr(graph, f).tolist() for f in _PER_ROW})
    out = []
    for k in range(len(steps)):
        group = rows[first[k] : first[k] + counts[k]]
        last = int(group[np.argmax(graph.end_ns[group])])
        out.append(
            (
                int(steps[k]),
                int(floor[k]),
                int(top[k]),
                walk_step(as_lists, last, int(floor[k]), int(counts[k])),
            )
        )
    return out


_PER_ROW = (
    "start_ns",
    "end_ns",
    "launch_end_ns",
    "launch_call",
    "category",
    "lane_prev",
    "event_pred",
    "other_prev",
    "rank_has_waits",
    "rank_pos",
    "instance",
    "arrival_ns",
    "binding",
)


def critical_paths(
    acts: RunActivities, graph: PathGraph, ranks: list[RankTrace]
) -> list[CriticalPath]:
    """One CriticalPath per step number present on any rank; the first profiled step is marked."""
    walks = step_walks(acts, graph)
    names = activity_names(acts, ranks) if walks else []
    first = walks[0][0] if len(walks) > 1 else None
    return [
        summarize_path(seg, acts, graph, step, floor, top - floor, names, step == first)
        for step, floor, top, seg in walks
        if len(seg)
    ]


__all__ = [
    "CATEGORIES",
    "EDGES",
    "CriticalPath",
    "PathGraph",
    "PathSegments",
    "critical_paths",
    "path_graph",
    "walk_step",
]
