"""What-if replay: the dependency graph of metrics.md §7 replayed as a discrete-event simulation
(metrics.md §11).

Every rank's GPU activities and CPU runtime calls are nodes. A GPU activity starts when its stream
predecessor, the producer of a recorded stream wait and its launch call are done, plus the latency
its binding edge carried in the trace (at most `LATENCY_CAP_NS`); an activity that started later
than that was held back: by §7's `resource` holder, else the other-stream activity that ended
just before it or that was running when it started (`held`, an inferred edge), else by nothing the trace records
(`unexplained`: its delay is kept after its ready time, and the time it carries is reported). A
matched collective's transfer starts when the last rank arrives. A CPU call starts its measured
host gap after the previous call on its thread ends (or when another thread woke it: `thread`,
inferred); a blocking synchronization ends its measured return latency after the activity it
waited for. A CPU run's activities follow their threads and §7's `thread` edges
(tpscope/metrics/replay_cpu_run.py).

Nodes are visited once, in the order of their measured times (a topological order of every edge
whose measured times are consistent; a CPU run's collective at the point its thread issued it); a
collective's end is resolved when first needed, once every member has arrived. What is read off a
replay (step times, the inferred time) is in tpscope/metrics/replay_measures.py. The graph and the durations are arrays; changes (tpscope/metrics/whatif_changes.py)
rewrite `dur_ns`, `transfer_ns` and the extra predecessors before `simulate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tpscope.metrics.activities import RunActivities
from tpscope.metrics.collectives import CollectiveMatch, CollectiveTiming
from tpscope.metrics.critical_path import PathGraph
from tpscope.metrics.replay_cpu_run import cpu_run_edges
from tpscope.trace import ActivityClass, RankTrace

LATENCY_CAP_NS = 10_000  # §7's tolerance: a longer gap after the binding edge was a hold
BLOCKED_GAP_NS = 1_000_000  # a CPU thread idle this long between runtime calls was blocked
# why a GPU activity started when it did (metrics.md §11)
READY = ("first", "stream", "event", "launch", "held", "unexplained", "host", "thread")
FIRST, STREAM, EVENT, LAUNCH, HELD, UNEXPLAINED, HOST, THREAD = range(len(READY))


@dataclass(frozen=True, slots=True)
class ReplayGraph:
    """The run's graph as arrays. GPU nodes are RunActivities rows (aligned clock); CPU nodes are
    every rank's runtime calls, rank after rank (`cpu_base` per rank position)."""

    start_ns: np.ndarray  # measured, aligned
    end_ns: np.ndarray
    dur_ns: np.ndarray
    stream_pred: np.ndarray  # -1: none
    event_pred: np.ndarray  # recorded stream wait's producer, -1
    held_pred: np.ndarray  # the other-stream activity that held it back (inferred), -1
    run_pred: np.ndarray  # the other-stream activity it started inside of (inferred), -1
    run_off_ns: np.ndarray  # its start after that activity's start
    launch_call: np.ndarray  # global CPU node, -1
    launch_off_ns: np.ndarray  # launch point after the call's start
    latency_ns: np.ndarray  # after the binding edge
    ready_kind: np.ndarray  # index into READY
    carried_ns: np.ndarray  # time an inferred or unexplained hold carried in the trace
    instance: np.ndarray  # matched collective instance, -1
    transfer_ns: np.ndarray  # a matched collective's transfer part (§5)
    issue_off_ns: np.ndarray  # a CPU run's collective: its start after its thread issued it
    wait_for: np.ndarray  # a CPU run's blocking wait: the collective it waited for (global), -1
    wait_lag_ns: np.ndarray  # its return after that collective's end
    step: np.ndarray
    rank_pos: np.ndarray
    is_comm: np.ndarray
    n_instances: int
    cpu_start_ns: np.ndarray
    cpu_end_ns: np.ndarray
    cpu_prev: np.ndarray  # previous call on the thread (global), -1
    cpu_gap_ns: np.ndarray  # host time after that previous call (after its start if nested)
    cpu_nested: np.ndarray  # bool: it started inside that previous call
    cpu_thread_pred: np.ndarray  # the other thread's call whose end woke it (inferred), -1
    cpu_thread_off_ns: np.ndarray  # its start after that call's end
    cpu_thread_carried_ns: np.ndarray  # the gap that wait replaced
    cpu_waited: np.ndarray  # the GPU row a blocking sync waited for, -1
    cpu_lag_ns: np.ndarray  # return latency after it
    cpu_base: np.ndarray
    window_edges: np.ndarray  # `window_edges`: per (rank, step) its §3 window's measured edges

    def __len__(self) -> int:
        return len(self.start_ns)


def running_on_other_lane(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per activity of one rank: the activity of another lane running when it started (the latest
    started of those whose span holds its start), else -1 (what held the GPU: §7's `resource`)."""
    out = np.full(len(lane), -1, np.int64)
    best = np.full(len(lane), np.iinfo(np.int64).min, np.int64)
    lanes = np.unique(lane).tolist()
    for other in lanes:  # a loop over pairs of lanes, not events
        rows = np.flatnonzero(lane == other)
        order = rows[np.argsort(start[rows], kind="stable")]
        starts = start[order]
        mine = np.flatnonzero(lane != other)
        j = np.searchsorted(starts, start[mine], side="left") - 1  # started strictly before
        cand = order[np.maximum(j, 0)]
        ok = (j >= 0) & (end[cand] > start[mine]) & (start[cand] > best[mine])
        out[mine[ok]] = cand[ok]
        best[mine[ok]] = start[cand[ok]]
    return out


def waker_on_other_thread(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per CPU call of one rank: the call of another thread that ended last at or before its
    start, else -1 (threads marked -1 neither wake nor are woken)."""
    out = np.full(len(tid), -1, np.int64)
    for t in np.unique(tid[tid >= 0]).tolist():  # a loop over threads, not calls
        mine = np.flatnonzero(tid == t)
        other = np.flatnonzero((tid != t) & (tid >= 0))
        if not len(other):
            continue
        order = other[np.argsort(end[other], kind="stable")]
        j = np.searchsorted(end[order], start[mine], side="right") - 1
        ok = j >= 0
        out[mine[ok]] = order[j[ok]]
    return out


def _rank_part(graph: PathGraph, pos: int, cpu_base: int) -> dict:
    g = graph.rank(pos)
    s, e = np.asarray(g.start_ns, np.int64), np.asarray(g.end_ns, np.int64)
    n = len(s)
    lane_prev = np.asarray(g.lane_prev, np.int64)
    event_pred = np.asarray(g.event_pred, np.int64)
    other = np.asarray(g.other_prev, np.int64)
    call = np.asarray(g.launch_call, np.int64)
    cpu = g.cpu
    cs, ce = np.asarray(cpu.start_ns, np.int64), np.asarray(cpu.end_ns, np.int64)
    has_call = call >= 0
    launch_pt = np.full(n, np.iinfo(np.int64).min, np.int64)
    launch_end = np.asarray(g.launch_end_ns, np.int64)
    known = has_call & (launch_end != np.iinfo(np.int64).min)
    launch_pt[known] = np.minimum(launch_end[known], s[known])
    off = np.zeros(n, np.int64)
    off[known] = launch_pt[known] - cs[call[known]]
    neg = np.iinfo(np.int64).min
    e_stream = np.where(lane_prev >= 0, e[np.maximum(lane_prev, 0)], neg)
    e_event = np.where(event_pred >= 0, e[np.maximum(event_pred, 0)], neg)
    cand = np.stack([np.full(n, neg), e_stream, e_event, launch_pt])
    kind = np.argmax(cand, axis=0)  # FIRST, STREAM, EVENT, LAUNCH
    ready = cand.max(axis=0)
    gap = s - ready
    latency = np.where(kind == FIRST, 0, gap)
    carried = np.zeros(n, np.int64)
    held = np.full(n, -1, np.int64)
    e_other = np.where(other >= 0, e[np.maximum(other, 0)], neg)
    long = (kind != FIRST) & (gap > LATENCY_CAP_NS)
    # §7's `resource` holder: what held the GPU when it could not start
    holder = np.asarray(g.holder, np.int64) if g.holder is not None else np.full(n, -1, np.int64)
    e_hold = np.where(holder >= 0, e[np.maximum(holder, 0)], neg)
    by_holder = long & (holder >= 0) & (e_hold > ready)
    held[by_holder] = holder[by_holder] + g.base
    latency[by_holder] = (s - e_hold)[by_holder]
    kind[by_holder] = HELD
    carried[by_holder] = gap[by_holder]
    by_other = long & ~by_holder & (other >= 0) & (e_other > ready)
    by_other &= s - e_other <= LATENCY_CAP_NS
    held[by_other] = other[by_other] + g.base
    latency[by_other] = (s - e_other)[by_other]
    kind[by_other] = HELD
    carried[by_other] = gap[by_other]
    cpu_run = graph.ranks[pos].cpu_run  # activities are CPU ops, lanes their threads
    lane = np.asarray(graph.acts.lane[g.base : g.base + n])
    running = running_on_other_lane(lane, s, e)
    by_running = long & ~by_holder & ~by_other & (running >= 0)
    run_pred = np.full(n, -1, np.int64)
    run_pred[by_running] = running[by_running] + g.base
    run_off = np.zeros(n, np.int64)
    run_off[by_running] = (s - s[np.maximum(running, 0)])[by_running]
    latency[by_running] = 0
    kind[by_running] = HELD
    carried[by_running] = gap[by_running]
    lost = long & ~by_holder & ~by_other & ~by_running
    kind[lost] = UNEXPLAINED
    stream_pred = np.where(lane_prev >= 0, lane_prev + g.base, -1)
    carried[lost] = gap[lost]
    latency[lost] = gap[lost]  # kept after its ready time: whatever held it is assumed to stay
    base = g.base
    # CPU calls of the rank: each after the previous call on its thread by start; after its end,
    # or (nested calls) after its start
    m = len(cs)
    tid = np.asarray(cpu.tid, np.int64)
    by_start = np.lexsort((ce, cs, tid))
    prev = np.full(m, -1, np.int64)
    if m > 1:
        same = tid[by_start][1:] == tid[by_start][:-1]
        prev[by_start[1:][same]] = by_start[:-1][same]
    pc = np.maximum(prev, 0)
    nested = (prev >= 0) & (ce[pc] > cs)
    gap_cpu = np.where(prev >= 0, np.where(nested, cs - cs[pc], cs - ce[pc]), 0)
    # a long gap that ends just after another thread's call ended: the thread waited for it
    # (blocked in backward() while the autograd thread works, woken by a queue): `thread`, inferred
    launching = np.zeros(m, bool)  # threads that launch GPU work (not a watchdog's timer)
    launching[call[known]] = True
    working = np.isin(tid, np.unique(tid[launching]))
    woke = waker_on_other_thread(np.where(working, tid, -1), cs, ce)
    pw = np.maximum(woke, 0)
    thread_wait = (
        (prev >= 0) & ~nested & (gap_cpu > BLOCKED_GAP_NS) & (woke >= 0) & (ce[pw] > ce[pc])
    )
    thread_pred = np.where(thread_wait, woke + cpu_base, -1)
    thread_off = np.where(thread_wait, cs - ce[pw], 0)
    waited = np.asarray(cpu.waited_for, np.int64)
    lag = np.where(waited >= 0, ce - np.maximum(cs, e[np.maximum(waited, 0)]), 0)
    part = dict(
        issue_off_ns=np.zeros(n, np.int64),
        wait_for=np.full(n, -1, np.int64),
        wait_lag_ns=np.zeros(n, np.int64),
    )
    if cpu_run:  # metrics.md §11, CPU runs: the threads' own edges replace the GPU's
        run = cpu_run_edges(g, graph.ranks[pos], lane, lane_prev, int(graph.offsets_ns[pos]))
        kind = np.where(run.pop("first"), FIRST, np.where(run.pop("binds"), THREAD, HOST))
        for k in ("stream_pred", "held_pred", "run_pred", "wait_for"):
            run[k] = np.where(run[k] >= 0, run[k] + base, -1)
        stream_pred, held, run_pred = (
            run.pop("stream_pred"),
            run.pop("held_pred"),
            run.pop("run_pred"),
        )
        run_off, latency, carried = (
            run.pop("run_off_ns"),
            run.pop("latency_ns"),
            run.pop("carried_ns"),
        )
        part.update(run)
    return dict(
        **part,
        start_ns=s,
        end_ns=e,
        stream_pred=stream_pred,
        event_pred=np.where(event_pred >= 0, event_pred + base, -1),
        held_pred=held,
        run_pred=run_pred,
        run_off_ns=run_off,
        launch_call=np.where(known, call + cpu_base, -1),
        launch_off_ns=off,
        latency_ns=latency,
        ready_kind=kind.astype(np.int8),
        carried_ns=carried,
        cpu_start_ns=cs,
        cpu_end_ns=ce,
        cpu_prev=np.where(prev >= 0, prev + cpu_base, -1),
        cpu_gap_ns=gap_cpu,
        cpu_nested=nested,
        cpu_thread_pred=thread_pred,
        cpu_thread_off_ns=thread_off,
        cpu_thread_carried_ns=np.where(thread_wait, gap_cpu, 0),
        cpu_waited=np.where(waited >= 0, waited + base, -1),
        cpu_lag_ns=lag,
    )


def replay_graph(
    acts: RunActivities, match: CollectiveMatch, timing: CollectiveTiming, graph: PathGraph
) -> ReplayGraph:
    """The replay's graph of every rank (metrics.md §11), from the critical path's graph (§7)."""
    parts, cpu_base, total = [], [], 0
    for pos in range(len(acts.rank_bounds) - 1):
        cpu_base.append(total)
        part = _rank_part(graph, pos, total)
        total += len(part["cpu_start_ns"])
        parts.append(part)
    cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    instance = np.asarray(match.instance, np.int64).copy()
    member = np.flatnonzero(instance >= 0)
    # a member that ended before the last member started cannot have waited for it: matched
    # inconsistently (or clocks disagree), it is replayed as an unmatched kernel
    # a member arrives when it started, or (CPU runs) when its thread issued it
    arrive = cat["start_ns"] - cat["issue_off_ns"]
    arrival = np.full(int(match.n_instances), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(arrival, instance[member], arrive[member])
    early = cat["end_ns"][member] < arrival[instance[member]]
    instance[member[early]] = -1
    transfer = np.asarray(timing.transfer_ns, np.int64).copy()
    member = np.flatnonzero(instance >= 0)
    arrival[:] = np.iinfo(np.int64).min
    np.maximum.at(arrival, instance[member], arrive[member])
    # a CPU run's collective: its transfer after the last member issued it, not after the last
    # range began
    issued = np.zeros(len(arrival), bool)
    issued[instance[member[cat["issue_off_ns"][member] > 0]]] = True
    m = member[issued[instance[member]]]
    transfer[m] = cat["end_ns"][m] - np.maximum(cat["start_ns"][m], arrival[instance[m]])
    return ReplayGraph(
        dur_ns=cat["end_ns"] - cat["start_ns"],
        instance=instance,
        transfer_ns=transfer,
        step=np.asarray(acts.step, np.int64),
        rank_pos=np.asarray(acts.rank_pos, np.int64),
        is_comm=acts.cls == ActivityClass.COMM,
        n_instances=int(match.n_instances),
        cpu_base=np.asarray(cpu_base, np.int64),
        window_edges=window_edges(acts, graph.ranks, graph.offsets_ns),
        **cat,
    )


@dataclass(frozen=True, slots=True)
class Replayed:
    """Replayed times of every GPU activity and CPU call, and the order violations met."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    cpu_start_ns: np.ndarray
    cpu_end_ns: np.ndarray
    arrival_ns: np.ndarray  # per collective instance
    out_of_order: int  # predecessors needed before they were replayed (measured times used)


def simulate(
    rg: ReplayGraph,
    dur_ns: np.ndarray | None = None,
    transfer_ns: np.ndarray | None = None,
    cpu_dur_scale: float = 1.0,
) -> Replayed:
    """The discrete-event replay (metrics.md §11) with the given durations (default: measured).

    A matched collective's end is max(own start, arrival) + transfer; any other activity's end is
    start + duration."""
    dur = (rg.dur_ns if dur_ns is None else dur_ns).tolist()
    transfer = (rg.transfer_ns if transfer_ns is None else transfer_ns).tolist()
    n, m = len(rg.start_ns), len(rg.cpu_start_ns)
    # visit order: CPU ends, then CPU starts, then GPU starts, by measured time
    # a CPU run's collective at the point its thread issued it: its members' arrivals
    keys = np.concatenate([rg.cpu_end_ns, rg.cpu_start_ns, rg.start_ns - rg.issue_off_ns])
    prio = np.concatenate([np.zeros(m, np.int8), np.ones(m, np.int8), np.full(n, 2, np.int8)])
    order = np.lexsort((prio, keys)).tolist()
    INF = None
    st = [INF] * n
    en = [INF] * n
    cst = [INF] * m
    cen = [INF] * m
    inst = rg.instance.tolist()
    members: list[list[int]] = [[] for _ in range(rg.n_instances)]
    for k, i in enumerate(inst):
        if i >= 0:
            members[i].append(k)
    arrival = [INF] * rg.n_instances
    sp, ep, hp = rg.stream_pred.tolist(), rg.event_pred.tolist(), rg.held_pred.tolist()
    lc, loff, lat = rg.launch_call.tolist(), rg.launch_off_ns.tolist(), rg.latency_ns.tolist()
    kind = rg.ready_kind.tolist()
    rp, roff = rg.run_pred.tolist(), rg.run_off_ns.tolist()
    ioff = rg.issue_off_ns.tolist()
    wf, wlag = rg.wait_for.tolist(), rg.wait_lag_ns.tolist()
    mst, men = rg.start_ns.tolist(), rg.end_ns.tolist()
    cprev, cgap = rg.cpu_prev.tolist(), rg.cpu_gap_ns.tolist()
    cwait, clag = rg.cpu_waited.tolist(), rg.cpu_lag_ns.tolist()
    mcs, mce = rg.cpu_start_ns.tolist(), rg.cpu_end_ns.tolist()
    nested = rg.cpu_nested.tolist()
    tpred, toff = rg.cpu_thread_pred.tolist(), rg.cpu_thread_off_ns.tolist()
    violations = 0

    def end_of(a: int) -> int:
        nonlocal violations
        v = en[a]
        if v is not None:
            return v
        w = wf[a]
        if w >= 0 and st[a] is not None:  # a blocking wait: after the collective it waited for
            v = end_of(w)
            v = en[a] = (st[a] if st[a] > v else v) + wlag[a]
            return v
        i = inst[a]
        if i >= 0 and st[a] is not None:
            arr = arrival[i]
            if arr is None:
                starts = [st[b] for b in members[i]]
                if any(x is None for x in starts):
                    violations += 1
                    return men[a]
                arr = arrival[i] = max(x - ioff[b] for x, b in zip(starts, members[i]))
            v = en[a] = max(st[a], arr) + transfer[a]
            return v
        violations += 1
        return men[a]

    for idx in order:
        if idx < m:  # a CPU call ends
            c = idx
            s = cst[c]
            if s is None and mcs[c] == mce[c]:
                continue  # a call of no duration ends when it starts (below)
            if s is None:
                violations += 1
                s = mcs[c]
            w = cwait[c]
            if w >= 0:
                cen[c] = max(s, end_of(w)) + clag[c]
            else:
                cen[c] = s + int((mce[c] - mcs[c]) * cpu_dur_scale)
        elif idx < 2 * m:  # a CPU call starts
            c = idx - m
            p = cprev[c]
            if p < 0:
                cst[c] = mcs[c]
            else:
                pe = cst[p] if nested[c] else cen[p]
                if pe is None:
                    violations += 1
                    pe = mcs[p] if nested[c] else mce[p]
                tp = tpred[c]
                if tp >= 0:  # woken by another thread: no earlier than its own previous call
                    we = cen[tp]
                    if we is None:
                        violations += 1
                        we = mce[tp]
                    cst[c] = max(pe, we + toff[c])
                else:
                    cst[c] = pe + int(cgap[c] * cpu_dur_scale)
            if mcs[c] == mce[c]:
                w = cwait[c]
                cen[c] = max(cst[c], end_of(w)) + clag[c] if w >= 0 else cst[c]
        else:  # a GPU activity starts
            a = idx - 2 * m
            kd = kind[a]
            if kd == 0:
                st[a] = mst[a]
            else:
                ready = None
                p = sp[a]
                if p >= 0:
                    ready = end_of(p)
                p = ep[a]
                if p >= 0:
                    v = end_of(p)
                    ready = v if ready is None or v > ready else ready
                p = hp[a]
                if p >= 0:
                    v = end_of(p)
                    ready = v if ready is None or v > ready else ready
                p = rp[a]
                if p >= 0:
                    v = st[p]
                    if v is None:
                        violations += 1
                        v = mst[p]
                    v += roff[a]
                    ready = v if ready is None or v > ready else ready
                c = lc[a]
                if c >= 0:
                    cs = cst[c]
                    if cs is None:
                        violations += 1
                        cs = mcs[c]
                    v = cs + loff[a]
                    ready = v if ready is None or v > ready else ready
                st[a] = ready + lat[a]
            if inst[a] < 0 and wf[a] < 0:
                en[a] = st[a] + dur[a]
    for a in range(n):
        if en[a] is None:
            end_of(a)
    arr = np.array([x if x is not None else 0 for x in arrival], np.int64)
    return Replayed(
        np.array(st, np.int64),
        np.array(en, np.int64),
        np.array(cst, np.int64),
        np.array(cen, np.int64),
        arr,
        violations,
    )


def window_edges(
    acts: RunActivities, ranks: Sequence[RankTrace], offsets_ns: np.ndarray
) -> np.ndarray:
    """Per (rank, step) with activities: rank position, step, how far its measured §3 window
    begins before its first activity (`head`) and ends after its last (`tail`; a CPU run's window
    ends where its `ProfilerStep#N` range ends), as rows of an (n, 4) int64 array."""
    rows = []
    for pos in range(len(acts.rank_bounds) - 1):  # a loop over ranks
        lo_r, hi_r = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        stp = acts.step[lo_r:hi_r]
        has = stp >= 0
        w = ranks[pos].steps
        if not has.any() or len(w) == 0:
            continue
        steps, inv = np.unique(stp[has], return_inverse=True)
        shift = int(offsets_ns[pos])
        lo = np.full(len(steps), np.iinfo(np.int64).max, np.int64)
        hi = np.full(len(steps), np.iinfo(np.int64).min, np.int64)
        np.minimum.at(lo, inv, (acts.start_ns[lo_r:hi_r] - shift)[has])
        np.maximum.at(hi, inv, (acts.end_ns[lo_r:hi_r] - shift)[has])
        k = np.searchsorted(w.step, steps)
        ok = (k < len(w.step)) & (w.step[np.minimum(k, len(w.step) - 1)] == steps)
        k = np.minimum(k, len(w.step) - 1)
        head = np.where(ok, lo - (w.start_ns[k] - shift), 0)
        tail = np.where(ok, (w.end_ns[k] - shift) - hi, 0)
        rows.append(np.stack([np.full(len(steps), pos), steps, head, tail], axis=1))
    return np.concatenate(rows) if rows else np.zeros((0, 4), np.int64)


__all__ = [
    "READY",
    "ReplayGraph",
    "Replayed",
    "replay_graph",
    "simulate",
    "window_edges",
]
