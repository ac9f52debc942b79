"""The names of host time on the critical path (metrics.md §7): a stretch of one CPU thread's time
is cut where the thread's CPU ops and user ranges (`record_function`) begin and end, and each piece
is named by the innermost op or range that holds it.

Per thread the ops and ranges nest; the index keeps them by start with each one's parent (the
innermost interval holding it), computed level by level of nesting, never per event in Python.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tpscope.trace import RankTrace
from tpscope.trace.columns import lookup, sorted_unique, unique_ids
from tpscope.trace.cpu_activities import COMM_RANGE_PREFIXES

# metrics.md §7: ranges that name no host time: the step markers, and a CPU run's collectives
# (they are activities of their own)
UNNAMING_RANGE_PREFIXES = ("ProfilerStep#",) + COMM_RANGE_PREFIXES


# `HostNames.idle_gaps` where there are none (read only)
_NO_GAPS = (np.zeros(0, np.int64), np.zeros(0, np.int64))
for _empty in _NO_GAPS:
    _empty.flags.writeable = False


@dataclass(frozen=True, slots=True)
class ThreadNest:
    """One thread's ops and ranges by start, on the aligned clock."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray  # index into HostNames.strings
    parent: np.ndarray  # the innermost interval holding it, -1
    is_range: np.ndarray  # bool: a user range (else a CPU op)
    # the innermost holder as a step function: between bounds[i] and bounds[i + 1], label[i]
    bounds: np.ndarray | None = None
    label: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class HostNames:
    """One rank's ops and ranges per CPU thread, to name host time by."""

    threads: dict  # tid -> ThreadNest
    strings: tuple[str, ...]
    # tid -> (starts, ends): the thread's busy time, the union of its CPU ops and runtime calls
    # (user ranges do not count: a thread blocked in `backward()` may sit in one)
    busy: dict | None = None
    # tid -> the thread's busy time before each of its busy intervals (one more than them)
    busy_before: dict | None = None
    # `strings` and "" after them as an object array (index -1: ""), for indexing by arrays
    string_objects: np.ndarray | None = None

    def busy_ns(self, tid: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per stretch [lo, hi]: how long thread `tid` ran CPU ops or runtime calls in it."""
        if self.busy is None or int(tid) not in self.busy:
            return np.zeros(len(lo), np.int64)
        s, e = self.busy[int(tid)]
        done = (
            self.busy_before[int(tid)]
            if self.busy_before is not None
            else np.concatenate([[0], np.cumsum(e - s)])
        )

        def before(t: np.ndarray) -> np.ndarray:  # busy time before t
            k = np.searchsorted(s, t, side="right")
            part = np.where(
                k > 0, np.minimum(t, e[np.maximum(k - 1, 0)]) - s[np.maximum(k - 1, 0)], 0
            )
            return done[np.maximum(k - 1, 0)] * (k > 0) + np.maximum(part, 0)

        return before(np.asarray(hi)) - before(np.asarray(lo))

    def idle_gaps(self, tid: int, lo: int, hi: int, min_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """The stretches of more than `min_ns` inside [lo, hi] in which thread `tid` ran no CPU op
        and no runtime call and after which it did, as (froms, tos) in time order."""
        spans = self.busy.get(int(tid)) if self.busy is not None else None
        if spans is None:
            return _NO_GAPS
        s, e = spans
        i0 = int(s.searchsorted(lo, side="right"))
        k = int(s.searchsorted(hi, side="right"))
        if k <= i0:
            return _NO_GAPS
        tos = s[i0:k]
        before = np.empty(k - i0, np.int64)  # the end of the busy time before each
        before[0] = e[i0 - 1] if i0 > 0 else lo
        before[1:] = e[i0 : k - 1]
        np.maximum(before, lo, out=before)
        long = tos - before > min_ns
        return before[long], tos[long]

    def innermost(self, tid: int, at_ns: np.ndarray) -> np.ndarray:
        """Per time: the name (index into `strings`) of the innermost op or range of thread `tid`
        holding it, -1 where none does."""
        nest = self.threads.get(int(tid))
        at_ns = np.asarray(at_ns, np.int64)
        if nest is None or nest.bounds is None or len(nest.label) == 0:
            return np.full(len(at_ns), -1, np.int64)
        i = np.searchsorted(nest.bounds, at_ns, side="right") - 1
        inside = (i >= 0) & (i < len(nest.label))
        return np.where(inside, nest.label[np.clip(i, 0, len(nest.label) - 1)], -1)

    def cuts(self, tid: int, lo: int, hi: int) -> np.ndarray:
        """The starts and ends of thread `tid`'s ops and ranges strictly inside (lo, hi), sorted."""
        nest = self.threads.get(int(tid))
        if nest is None or nest.bounds is None or hi <= lo:
            return np.zeros(0, np.int64)
        a = np.searchsorted(nest.bounds, lo, side="right")
        b = np.searchsorted(nest.bounds, hi, side="left")
        return nest.bounds[a:b]


def _innermost_at(nest: ThreadNest, at_ns: np.ndarray) -> np.ndarray:
    """Per time: the name of the innermost interval of `nest` holding it, -1 (a loop over the
    levels of nesting, each step vectorized over all the times)."""
    k = np.searchsorted(nest.start_ns, at_ns, side="right") - 1
    for _ in range(len(nest.start_ns) + 1):  # bounded by the depth of nesting
        kc = np.maximum(k, 0)
        up = (k >= 0) & (nest.end_ns[kc] <= at_ns)
        if not up.any():
            break
        k = np.where(up, nest.parent[kc], k)
    return np.where(k >= 0, nest.name[np.maximum(k, 0)], -1)


def nest_parents(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For intervals sorted by (start, -end) that nest: the index of each one's innermost holder,
    -1 for a top-level one. The depth of an interval is the number before it less those that ended
    by its start; its parent is the last interval before it one level up (a loop over levels)."""
    n = len(start)
    parent = np.full(n, -1, np.int64)
    if n == 0:
        return parent
    ended = np.searchsorted(np.sort(end), start, side="right")
    depth = np.maximum(np.arange(n) - ended, 0)
    for d in range(1, int(depth.max()) + 1):
        up = np.flatnonzero(depth == d - 1)
        mine = np.flatnonzero(depth == d)
        j = np.searchsorted(up, mine, side="left") - 1
        parent[mine] = np.where(j >= 0, up[np.maximum(j, 0)], -1)
    return parent


def host_names(r: RankTrace, shift: int) -> HostNames:
    """The index of one rank's CPU ops and user ranges (times less `shift`) by thread, with the
    runtime calls that no CPU op made (`cudaMalloc` inside the caching allocator...), each the
    innermost holder of its own time."""
    ops, ann, rt = r.cpu_ops, r.annotations, r.runtime
    made = lookup(ops.external_id, np.arange(len(ops), dtype=np.int64), rt.external_id)
    own = (rt.external_id < 0) | (made < 0)
    own &= rt.name_id >= 0
    cpu_range = ~ann.on_gpu
    ids = np.unique(ann.name_id[cpu_range])
    naming = np.array(
        [k >= 0 and not r.symbols[k].startswith(UNNAMING_RANGE_PREFIXES) for k in ids.tolist()],
        bool,
    )
    keep = cpu_range.copy()
    keep[cpu_range] = naming[np.searchsorted(ids, ann.name_id[cpu_range])] if len(ids) else False
    start = np.concatenate([ops.start_ns, ann.start_ns[keep], rt.start_ns[own]]) - shift
    end = np.concatenate([ops.end_ns, ann.end_ns[keep], rt.end_ns[own]]) - shift
    name_id = np.concatenate([ops.name_id, ann.name_id[keep], rt.name_id[own]]).astype(np.int64)
    tid = np.concatenate([ops.tid, ann.tid[keep], rt.tid[own]])
    is_range = np.concatenate(
        [np.zeros(len(ops), bool), np.ones(int(keep.sum()), bool), np.zeros(int(own.sum()), bool)]
    )
    uniq, name = unique_ids(name_id)
    strings = tuple(r.symbols[k] if k >= 0 else "" for k in uniq.tolist())
    name = name.ravel()
    busy = {}
    b_start = np.concatenate([ops.start_ns, rt.start_ns]) - shift
    b_end = np.concatenate([ops.end_ns, rt.end_ns]) - shift
    b_tid = np.concatenate([ops.tid, rt.tid])
    for t in np.unique(b_tid).tolist():  # a loop over threads, not events
        rows = np.flatnonzero(b_tid == t)
        busy[int(t)] = _union(b_start[rows], b_end[rows])
    threads = {}
    for t in np.unique(tid).tolist():  # a loop over threads, not events
        rows = np.flatnonzero(tid == t)
        rows = rows[np.lexsort((-end[rows], start[rows]))]
        nest = ThreadNest(
            start_ns=start[rows],
            end_ns=end[rows],
            name=name[rows],
            parent=nest_parents(start[rows], end[rows]),
            is_range=is_range[rows],
        )
        bounds = sorted_unique(np.concatenate([nest.start_ns, nest.end_ns]))
        mids = bounds[:-1] + (bounds[1:] - bounds[:-1]) // 2
        threads[int(t)] = dataclasses.replace(nest, bounds=bounds, label=_innermost_at(nest, mids))
    return HostNames(
        threads=threads,
        strings=strings,
        busy=busy,
        busy_before={t: np.concatenate([[0], np.cumsum(e - s)]) for t, (s, e) in busy.items()},
        string_objects=np.array(strings + ("",), dtype=object),
    )


def _union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted disjoint (starts, ends)."""
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order]) if len(end) else end
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], e[last]


def named_pieces(names: HostNames, tid: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Thread `tid`'s time [lo, hi] cut where its ops and ranges begin and end: the pieces'
    bounds (one more than the pieces) and each one's innermost holder (index into
    `names.strings`, -1 where nothing holds it), runs of one name merged."""
    nest = names.threads.get(int(tid))
    if nest is None or nest.bounds is None or len(nest.label) == 0 or hi <= lo:
        bounds = np.concatenate([[lo], names.cuts(tid, lo, hi), [hi]]).astype(np.int64)
        label = names.innermost(tid, (bounds[:-1] + bounds[1:]) // 2)
    else:  # the pieces are the step function's between the bounds inside (lo, hi): slices
        a = int(nest.bounds.searchsorted(lo, side="right"))
        b = int(nest.bounds.searchsorted(hi, side="left"))
        bounds = np.empty(b - a + 2, np.int64)
        bounds[0], bounds[1:-1], bounds[-1] = lo, nest.bounds[a:b], hi
        label = np.empty(b - a + 1, np.int64)  # the label of bounds' step a-1 .. b-1, -1 outside
        label[:] = -1
        inside_lo, inside_hi = max(a - 1, 0), min(b, len(nest.label))
        if inside_hi > inside_lo:
            label[inside_lo - (a - 1) : inside_hi - (a - 1)] = nest.label[inside_lo:inside_hi]
    keep = np.empty(len(label), bool)  # the first piece of each run
    keep[0] = True
    np.not_equal(label[1:], label[:-1], out=keep[1:])
    return np.append(bounds[:-1][keep], hi), label[keep]
