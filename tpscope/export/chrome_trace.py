"""A step (or a whole run) of a run as Chrome/Kineto trace JSON, one trace per rank as
torch.profiler writes them (each with its `distributedInfo.rank`, so tpscope and HTA read the
files back as the same ranks), with tpscope's findings as tracks beside the GPU streams, for
Perfetto (ui.perfetto.dev), chrome://tracing and HTA.

Every rank is a process (`rank R · GPU D`, or `rank R · CPU` for a CPU run); its streams are
threads named by role (`stream 7 · NCCL · group 0`; a CPU run's `thread 12 · compute`, lanes.py);
its activities are complete events (`ph: X`, the Kineto categories `kernel`, `gpu_memcpy`,
`gpu_memset` with Kineto's args; `cpu_op` for a CPU run). The CPU calls that launched them are
`cuda_runtime` events on a `launch calls` thread, tied to their kernel by a flow (`ph: s` / `f`,
category `ac2g`, as Kineto writes it; one id per flow). No two complete events on one thread
overlap without one holding the other (Perfetto drops such events): an event that would is moved
to a second thread of the same name, `(2)`. The profiler's step marks, `ProfilerStep#N`, are on a
`steps` thread. Three tracks per rank carry what tpscope computed, as `gpu_user_annotation` events
(so tpscope and HTA read them back as annotations):
- `tpscope · critical path`: the step's critical path (metrics.md §7) where it runs on this rank,
  one event per segment named by its kind;
- `tpscope · collective wait/transfer`: each matched collective kernel split into the time it
  waited for the last rank and the time it transferred (§5);
- `tpscope · contention`: each compute kernel whose signature has an isolated median, named by
  its slowdown against it (§8).
Times are µs on the aligned clock (§6), so ranks line up; a `ProfilerStep#N` annotation marks the
step on each rank, as the profiler does.
"""

from __future__ import annotations

import numpy as np

from tpscope.export.lanes import lane_names
from tpscope.metrics.per_activity import PATH_KINDS, ActivityDetail, path_segments
from tpscope.trace import ActivityClass, ActivityKind, Run

CATEGORY_OF_KIND = {
    ActivityKind.KERNEL: "kernel",
    ActivityKind.MEMCPY: "gpu_memcpy",
    ActivityKind.MEMSET: "gpu_memset",
}
TRACKS = ("tpscope · critical path", "tpscope · collective wait/transfer", "tpscope · contention")
"""The added threads of each rank, in this order after its streams."""
TRACK_TID = 1_000_000_000  # the added tracks' thread ids start here (streams are small numbers)
LAUNCH_TID = TRACK_TID - 1  # the launch calls' thread
STEPS_TID = TRACK_TID - 2  # the ProfilerStep marks' thread
SPLIT_TID = 10_000_000_000  # a thread's second, third ... track: tid + k * SPLIT_TID
ANNOTATION = "gpu_user_annotation"


def _complete(name, cat, pid, tid, start_ns, end_ns, args) -> list[dict]:
    """Complete events (`ph: X`) from parallel arrays; `args` a list of dicts. Times stay integer
    ns (aligned clock) until `_to_us` writes them relative to the file's base."""
    start = np.asarray(start_ns, dtype=np.int64)
    dur = np.asarray(end_ns, dtype=np.int64) - start
    return [
        {
            "ph": "X",
            "cat": cat,
            "name": str(n),
            "pid": pid,
            "tid": int(t),
            "ts": a,
            "dur": d,
            "args": ar,
        }
        for n, t, a, d, ar in zip(name, tid, start.tolist(), dur.tolist(), args)
    ]


def _to_us(events: list[dict]) -> int:
    """Every timed event's ts as µs after the earliest (3 decimals: the ns the trace holds), its dur
    in µs; the base, in ns, is returned for the header's `baseTimeNanoseconds` (as Kineto writes it,
    ts + base is the time on the clock). Absolute µs would not fit a double to the ns."""
    timed = [e for e in events if e["ph"] != "M"]
    base = min((e["ts"] for e in timed), default=0) // 1000 * 1000
    for e in timed:  # once per event written, not in the analyzer's path
        e["ts"] = round((e["ts"] - base) / 1000.0, 3)
        if "dur" in e:
            e["dur"] = round(e["dur"] / 1000.0, 3)
    return int(base)


def _meta(pid: int, tid: int | None, what: str, name: str, sort: int | None = None) -> list[dict]:
    base = {"ph": "M", "pid": pid, **({"tid": tid} if tid is not None else {})}
    out = [{**base, "name": what, "args": {"name": name}}]
    if sort is not None:
        out.append(
            {**base, "name": what.replace("_name", "_sort_index"), "args": {"sort_index": sort}}
        )
    return out


def rank_traces(
    run: Run,
    detail: ActivityDetail | None,
    step: int | None,
    ranks: list[int] | None = None,
    offsets_us: dict | None = None,
    kernel_contention=(),
) -> dict[int, dict]:
    """The trace JSON (a dict) of `step` (None: every step) per rank of `ranks` (None: all), on
    one time base (every file's `baseTimeNanoseconds` is the same, so the ranks line up)."""
    offsets = {int(k): int(round(v * 1000)) for k, v in (offsets_us or {}).items() if v is not None}
    ranks = sorted(r.rank for r in run.ranks) if ranks is None else sorted(ranks)
    isolated = {
        k.signature: k.isolated_median_us
        for k in kernel_contention or ()
        if getattr(k, "isolated_median_us", None)
    }
    per_rank: dict[int, list[dict]] = {}
    for r in run.ranks:  # once per rank
        if r.rank not in ranks:
            continue
        events = _rank_events(run, r, detail, step, offsets.get(r.rank, 0), isolated)
        if events:
            per_rank[r.rank] = _split_overlaps(events)
    base = _to_us([e for events in per_rank.values() for e in events])
    world = len(run.ranks)
    sizes = {r.world_size for r in run.ranks.headers if r.world_size}
    if sizes:
        world = max(max(sizes), world)
    return {
        rank: {
            "distributedInfo": {"rank": rank, "world_size": world},  # first: HTA looks for it
            "schemaVersion": 1,
            "displayTimeUnit": "ns",
            "traceName": f"tpscope export, {_what(step)}, rank {rank}",
            "baseTimeNanoseconds": base,
            "traceEvents": events,
        }
        for rank, events in per_rank.items()
    }


def _what(step: int | None) -> str:
    return "every step" if step is None else f"step {step}"


def _rank_events(run, r, detail, step, off, isolated) -> list[dict]:
    window = _window(r, step)
    if window is None:
        return []
    lo, hi = window
    g = r.gpu
    rows = np.flatnonzero((g.start_ns < hi) & (g.end_ns > lo))
    cpu = bool(getattr(r, "cpu_run", False))
    device = int(r.lanes[0][0]) if len(r.lanes) else 0
    pid = r.rank
    where = "CPU" if cpu else f"GPU {device}"
    events = _meta(pid, None, "process_name", f"rank {r.rank} · {where}", sort=r.rank)
    events.append(
        {
            "ph": "M",
            "pid": pid,
            "name": "process_labels",
            "args": {"labels": f"clock offset {off} ns"},
        }
    )
    names = lane_names(r)
    streams = r.lanes[:, 1].astype(np.int64) if len(r.lanes) else np.zeros(0, np.int64)
    for k, label in enumerate(names):
        events += _meta(pid, int(streams[k]), "thread_name", label, sort=k)
    events += _gpu_events(r, rows, pid, streams, off, cpu)
    if not cpu:
        events += _launches(r, rows, pid, streams, off)
    marker_stream = int(streams[g.lane[rows[0]]]) if len(rows) else 0
    events += _meta(pid, STEPS_TID, "thread_name", "steps", sort=-2)
    for s in [step] if step is not None else sorted(set(r.steps.step.tolist())):
        m = r.steps.step == s
        if m.any():
            s_lo, s_hi = int(r.steps.start_ns[m].min()), int(r.steps.end_ns[m].max())
            args = {"step": int(s)}
            if not cpu:  # the stream the profiler puts it on, as Kineto's args name it
                args.update({"device": device, "stream": marker_stream})
            events += _complete(
                [f"ProfilerStep#{s}"],
                "user_annotation" if cpu else ANNOTATION,
                pid,
                [STEPS_TID],
                [s_lo - off],
                [s_hi - off],
                [args],
            )
    for i, track in enumerate(TRACKS):
        events += _meta(pid, TRACK_TID + i, "thread_name", track, sort=len(names) + 1 + i)
    if detail is not None:
        events += _path_events(run, detail, step, r.rank, pid)
        events += _wait_events(run, detail, step, r.rank, pid)
    events += _contention_events(r, rows, pid, off, isolated)
    return events


def _split_overlaps(events: list[dict]) -> list[dict]:
    """Move each complete event that overlaps another on its thread without one holding the other
    to the thread's next track (tid + k * SPLIT_TID, named as the thread with ` (k+1)`), the first
    one where it nests or stands alone. Times are still integer ns here."""
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    timed = [e for e in events if e["ph"] == "X"]
    timed.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    open_ends: dict[tuple, list[list[int]]] = {}  # (pid, tid) -> per track, the stack of open ends
    added: dict[tuple, int] = {}
    for e in timed:  # once per event written, not in the analyzer's path
        key = (e["pid"], e["tid"])
        tracks = open_ends.setdefault(key, [])
        start, end = e["ts"], e["ts"] + e["dur"]
        for k, stack in enumerate(tracks + [[]]):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                if k == len(tracks):
                    tracks.append(stack)
                if k:
                    e["tid"] = key[1] + k * SPLIT_TID
                    added[(key[0], e["tid"])] = k
                break
    out = list(events)
    for (pid, tid), k in sorted(added.items()):
        base = (pid, tid - k * SPLIT_TID)
        out += _meta(pid, tid, "thread_name", f"{names.get(base, f'thread {base[1]}')} ({k + 1})")
    return out


def _window(r, step: int | None) -> tuple[int, int] | None:
    """The rank's own-clock span of `step` (or of all its activity)."""
    if step is None:
        if not len(r.gpu):
            return None
        return int(r.gpu.start_ns.min()), int(r.gpu.end_ns.max())
    m = r.steps.step == step
    if not m.any():
        return None
    return int(r.steps.start_ns[m].min()), int(r.steps.end_ns[m].max())


def _gpu_events(r, rows, pid, streams, off, cpu: bool = False) -> list[dict]:
    g = r.gpu
    symbols = np.asarray(r.symbols, dtype=object)
    cats = np.array(
        [CATEGORY_OF_KIND[ActivityKind(k)] for k in range(len(CATEGORY_OF_KIND))], dtype=object
    )
    args = []
    for i in rows.tolist():  # one dict per event written
        a = (
            _cpu_args(r, i)
            if cpu
            else {
                "device": int(r.lanes[g.lane[i]][0]),
                "stream": int(streams[g.lane[i]]),
                "correlation": int(g.correlation[i]),
                "External id": int(g.external_id[i]),
            }
        )
        if g.coll_name_id[i] >= 0:
            a.update(
                {
                    "Collective name": r.symbols[g.coll_name_id[i]],
                    "In msg nelems": int(g.in_nelems[i]),
                    "Out msg nelems": int(g.out_nelems[i]),
                    "Group size": int(g.group_size[i]),
                }
            )
            if g.pg_name_id[i] >= 0:
                a["Process Group Name"] = r.symbols[g.pg_name_id[i]]
            if g.dtype_id[i] >= 0:
                a["dtype"] = r.symbols[g.dtype_id[i]]
        args.append(a)
    events = _complete(
        symbols[g.name_id[rows]],
        "",
        pid,
        streams[g.lane[rows]],
        g.start_ns[rows] - off,
        g.end_ns[rows] - off,
        args,
    )
    for e, cat, c in zip(events, cats[g.kind[rows]], g.cls[rows].tolist()):
        # a CPU run's collectives are the ranges gloo records (`user_annotation`), its compute ops
        e["cat"] = ("user_annotation" if c == ActivityClass.COMM else "cpu_op") if cpu else cat
    return events


def _cpu_args(r, i: int) -> dict:
    """A CPU run's activity's args, as the profiler writes them: its inputs' dims and type."""
    import json

    g = r.gpu
    a = {"External id": int(g.external_id[i])}
    if g.dims_id[i] >= 0:
        try:
            a["Input Dims"] = json.loads(r.symbols[g.dims_id[i]])
        except ValueError:
            pass
    if g.dtype_id[i] >= 0:
        a["Input type"] = [r.symbols[g.dtype_id[i]]]
    return a


def _launches(r, rows, pid, streams, off) -> list[dict]:
    """The launch call of each GPU activity that has one, and a flow from it to the activity."""
    g = r.gpu
    rows = rows[(g.launch_start_ns[rows] >= 0) & (g.correlation[rows] >= 0)]
    if not len(rows):
        return []
    events = _meta(pid, LAUNCH_TID, "thread_name", "launch calls (CPU)", sort=-1)
    end = np.maximum(g.launch_end_ns[rows], g.launch_start_ns[rows])
    events += _complete(
        ["cudaLaunchKernel"] * len(rows),
        "cuda_runtime",
        pid,
        [LAUNCH_TID] * len(rows),
        g.launch_start_ns[rows] - off,
        end - off,
        [{"correlation": int(c)} for c in g.correlation[rows].tolist()],
    )
    ts_launch, ts_gpu = (g.launch_start_ns[rows] - off).tolist(), (g.start_ns[rows] - off).tolist()
    for n, (a, b, t) in enumerate(zip(ts_launch, ts_gpu, streams[g.lane[rows]].tolist())):
        flow = {"cat": "ac2g", "name": "ac2g", "id": n + 1, "pid": pid}  # one id per flow
        events.append({**flow, "ph": "s", "tid": LAUNCH_TID, "ts": int(a)})
        events.append({**flow, "ph": "f", "bp": "e", "tid": int(t), "ts": int(b)})
    return events


def _path_ranks(run, detail, seg) -> np.ndarray:
    """The rank of each path segment: its activity's, or (a CPU segment, row -1) its rank_pos's."""
    rank = np.where(seg.row >= 0, detail.rank[np.maximum(seg.row, 0)], -1)
    pos = getattr(seg, "rank_pos", None)
    if pos is not None:
        numbers = np.array([r.rank for r in run.ranks], dtype=np.int64)
        cpu = seg.row < 0
        rank[cpu] = numbers[np.asarray(pos)[cpu]]
    return rank


def _path_events(run, detail, step, rank, pid) -> list[dict]:
    from tpscope.metrics import critical_path as cp

    edges = np.asarray(getattr(cp, "EDGES", ()), dtype=object)
    steps = (
        [step]
        if step is not None
        else sorted(set(np.unique(detail.step[detail.step >= 0]).tolist()))
    )
    out = []
    for s in steps:
        seg = path_segments(detail, s)
        mine = _path_ranks(run, detail, seg) == rank
        if not mine.any():
            continue
        kinds = np.asarray(PATH_KINDS, dtype=object)[seg.category[mine]]
        args = [
            {"kind": k, "step": int(s), "order": int(i)}
            for i, k in zip(np.flatnonzero(mine).tolist(), kinds)
        ]
        edge, inferred = getattr(seg, "edge", None), getattr(seg, "inferred", None)
        for a, i in zip(args, np.flatnonzero(mine).tolist()):  # the fields a segment has (§7)
            if edge is not None and len(edges) > int(edge[i]):
                a["edge"] = str(edges[int(edge[i])])
            if inferred is not None:
                a["inferred"] = bool(inferred[i])
            a["on"] = "GPU" if seg.row[i] >= 0 else "CPU"
        out += _complete(
            kinds,
            ANNOTATION,
            pid,
            [TRACK_TID] * int(mine.sum()),
            seg.start_ns[mine],
            seg.end_ns[mine],
            args,
        )
    return out


def _wait_events(run, detail, step, rank, pid) -> list[dict]:
    m = (detail.rank == rank) & (detail.instance >= 0)
    if step is not None:
        m &= detail.step == step
    rows = np.flatnonzero(m)
    if not len(rows):
        return []
    keys = np.asarray(detail.instance_key or [""] * (int(detail.instance.max()) + 1), dtype=object)
    key = keys[detail.instance[rows]]
    start, end, wait = (
        detail.start_ns[rows],
        detail.end_ns[rows],
        np.minimum(detail.wait_ns[rows], detail.end_ns[rows] - detail.start_ns[rows]),
    )
    tid = [TRACK_TID + 1] * len(rows)
    args = [
        {"collective": str(k), "step": int(s), "wait_us": float(w) / 1000.0}
        for k, s, w in zip(key, detail.step[rows].tolist(), wait.tolist())
    ]
    waited = wait > 0
    out = _complete(
        ["wait"] * int(waited.sum()),
        ANNOTATION,
        pid,
        tid[: int(waited.sum())],
        start[waited],
        start[waited] + wait[waited],
        [a for a, w in zip(args, waited) if w],
    )
    out += _complete(["transfer"] * len(rows), ANNOTATION, pid, tid, start + wait, end, args)
    return out


def _contention_events(r, rows, pid, off, isolated: dict) -> list[dict]:
    g = r.gpu
    rows = rows[(g.cls[rows] == ActivityClass.COMPUTE) & (g.signature_id[rows] >= 0)]
    if not len(rows) or not isolated:
        return []
    sig = np.asarray(r.symbols, dtype=object)[g.signature_id[rows]]
    median = np.array([isolated.get(s, np.nan) for s in sig], dtype=float)
    keep = ~np.isnan(median)
    rows, sig, median = rows[keep], sig[keep], median[keep]
    dur_us = (g.end_ns[rows] - g.start_ns[rows]) / 1000.0
    slowdown = dur_us / median - 1.0
    names = [f"{s:+.0%} vs isolated" for s in slowdown]
    args = [
        {
            "signature": str(s),
            "duration_us": float(d),
            "isolated_median_us": float(m),
            "slowdown": float(x),
        }
        for s, d, m, x in zip(sig, dur_us, median, slowdown)
    ]
    return _complete(
        names,
        ANNOTATION,
        pid,
        [TRACK_TID + 2] * len(rows),
        g.start_ns[rows] - off,
        g.end_ns[rows] - off,
        args,
    )


def trace_text(trace: dict) -> str:
    """One rank's trace as JSON text: UTF-8 names as they are, `"rank": R` spaced as the profiler
    writes it (HTA finds a file's rank by that spelling)."""
    import json

    return json.dumps(trace, allow_nan=False, ensure_ascii=False)


def trace_file_name(rank: int, trace: dict) -> str:
    """`rank{R}.{BASE_NS}.pt.trace.json`: the profiler's `WORKER.TIMESTAMP.pt.trace.json`."""
    return f"rank{rank}.{int(trace['baseTimeNanoseconds'])}.pt.trace.json"
