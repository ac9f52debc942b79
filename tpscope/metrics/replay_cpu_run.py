"""The replay's edges on a CPU run (metrics.md §11, "CPU runs"): each thread's activities in
order, its gaps its own host work, and the `thread` edges of the critical path's graph (§7)
between threads and collectives, as arrays (loops over threads, never over events)."""

from __future__ import annotations

import numpy as np

from tpscope.metrics.critical_path import RankGraph
from tpscope.metrics.thread_edges import _issue_ops
from tpscope.trace import ActivityClass, RankTrace
from tpscope.trace.cpu_activities import is_blocking_wait

_NONE = np.iinfo(np.int64).min


def issue_offsets(
    r: RankTrace,
    tid: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    lane_prev: np.ndarray,
    shift: int,
) -> np.ndarray:
    """Per activity of a CPU run's rank: for a collective, its start after the start of the op of
    its own thread that issued it (the latest `c10d::` issue op on that thread started in the
    thread's gap before it: a `gloo:send` range begins once `c10d::send` has handed the data
    over), else 0; a blocking wait issues nothing."""
    out = np.zeros(len(start), np.int64)
    comm = np.flatnonzero(r.gpu.cls == ActivityClass.COMM)
    comm = comm[~is_blocking_wait(r.gpu.name_id[comm], r.symbols)]
    issue = _issue_ops(r)
    if len(comm) == 0 or len(issue) == 0:
        return out
    i_tid = r.cpu_ops.tid[issue]
    i_start = r.cpu_ops.start_ns[issue] - shift
    p = np.maximum(lane_prev, 0)
    # the thread's gap before each activity: from its previous activity's end (its start, where
    # it began inside that one: an `isend`'s range still running)
    gap_lo = np.where(lane_prev >= 0, np.where(end[p] <= start, end[p], start[p]), _NONE)
    for t in np.unique(tid[comm]).tolist():  # a loop over threads, not events
        mine = comm[tid[comm] == t]
        ops = np.sort(i_start[i_tid == t])
        if len(ops) == 0:
            continue
        k = np.searchsorted(ops, start[mine], side="right") - 1
        ok = (k >= 0) & (ops[np.maximum(k, 0)] >= gap_lo[mine])
        out[mine[ok]] = start[mine[ok]] - ops[k[ok]]
    return out


def waits_for_collectives(
    r: RankTrace, lane: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Per activity of a CPU run's rank: for a blocking wait (`wait_tensor`, `c10d::wait`), the
    collective of another thread that ended last inside it (what it waited for), else -1."""
    out = np.full(len(start), -1, np.int64)
    comm = r.gpu.cls == ActivityClass.COMM
    waits = comm & is_blocking_wait(r.gpu.name_id, r.symbols)
    coll = np.flatnonzero(comm & ~waits)
    w = np.flatnonzero(waits)
    if len(coll) == 0 or len(w) == 0:
        return out
    coll = coll[np.argsort(end[coll], kind="stable")]
    j = np.searchsorted(end[coll], end[w], side="right") - 1
    c = coll[np.maximum(j, 0)]
    ok = (j >= 0) & (end[c] >= start[w]) & (lane[c] != lane[w])
    out[w[ok]] = c[ok]
    return out


def cpu_run_edges(
    g: RankGraph, r: RankTrace, lane: np.ndarray, lane_prev: np.ndarray, shift: int
) -> dict:
    """The replay's per-activity edges of one CPU-run rank (rows of the rank, not yet global).

    An activity starts after the previous one on its thread ends (its start plus the offset,
    where it began inside it: an `isend`'s range still running), then the thread's measured gap
    (its own host work). A collective issued by another thread (§7's `thread` edge) starts no
    earlier than the issuing thread's last activity before it ends, plus the measured offset; an
    activity whose thread issued a collective and then waited for it, no earlier than that
    collective's end plus the measured offset. A blocking wait ends its measured return latency
    after the collective it waited for ends."""
    s = np.asarray(g.start_ns, np.int64)
    e = np.asarray(g.end_ns, np.int64)
    n = len(s)
    p = np.maximum(lane_prev, 0)
    has_prev = lane_prev >= 0
    inside = has_prev & (s < e[p])
    stream_pred = np.where(has_prev & ~inside, lane_prev, -1)
    run_pred = np.where(inside, lane_prev, -1)
    run_off = np.where(inside, s - s[p], 0)
    comm = np.asarray(r.gpu.cls) == ActivityClass.COMM
    issuer = np.asarray(g.issuer_prev, np.int64) if g.issuer_prev is not None else np.full(n, -1)
    waited = np.asarray(g.waited_coll, np.int64) if g.waited_coll is not None else np.full(n, -1)
    held = np.where(comm & (issuer >= 0), issuer, np.where(waited >= 0, waited, -1))
    ready = np.where(stream_pred >= 0, e[p], _NONE)
    ready = np.where(inside, s, ready)
    e_held = np.where(held >= 0, e[np.maximum(held, 0)], _NONE)
    binds = (held >= 0) & (e_held > ready) & (e_held <= s)
    held = np.where(binds | ((held >= 0) & (e_held <= s)), held, -1)
    ready = np.maximum(ready, np.where(held >= 0, e_held, _NONE))
    first = ready == _NONE
    latency = np.where(first, 0, s - ready)
    latency = np.where(inside & ~binds, 0, latency)
    carried = np.where(binds, s - np.where(stream_pred >= 0, e[p], e_held), 0)
    wait_for = waits_for_collectives(r, lane, s, e)
    wf = np.maximum(wait_for, 0)
    wait_lag = np.where(wait_for >= 0, e - np.maximum(s, e[wf]), 0)
    return dict(
        stream_pred=stream_pred,
        held_pred=held,
        run_pred=run_pred,
        run_off_ns=run_off,
        latency_ns=latency,
        first=first,  # no predecessor: starts when it did
        binds=binds,  # a `thread` edge set its start (else its own thread's gap)
        carried_ns=carried,
        wait_for=wait_for,
        wait_lag_ns=wait_lag,
        issue_off_ns=issue_offsets(r, np.asarray(g.tid, np.int64), s, e, lane_prev, shift)
        if g.tid is not None
        else np.zeros(n, np.int64),
    )
