"""A decoded trace file -> the columnar tables of `tables.py` (metrics.md §1, §2)."""

from __future__ import annotations

from operator import itemgetter
from pathlib import Path

import numpy as np

from tpscope.trace.classify import GPU_CATEGORIES, ActivityClass, classify
from tpscope.trace.columns import MISSING, SymbolTable, float_column, int_column, lookup, us_to_ns
from tpscope.trace.schema import Args, Event, TraceFile
from tpscope.trace.steps import step_windows
from tpscope.trace.tables import GpuActivities, Ranges, RankTrace, StreamWaits

# (ph, lower-case cat) -> group. Older traces spell categories "Kernel", "Runtime", "Memcpy".
_GROUPS: dict[str, str] = {
    "kernel": "gpu",
    "gpu_memcpy": "gpu",
    "memcpy": "gpu",
    "gpu_memset": "gpu",
    "memset": "gpu",
    "cuda_runtime": "launch",
    "cuda_driver": "launch",
    "runtime": "launch",
    "user_annotation": "cpu_range",
    "gpu_user_annotation": "gpu_range",
    "cpu_op": "cpu_op",
    "cuda_sync": "sync",
}
_KIND_OF_CAT = {**GPU_CATEGORIES, "memcpy": GPU_CATEGORIES["gpu_memcpy"], "memset": GPU_CATEGORIES["gpu_memset"]}
_EMPTY_ARGS = Args()


def _select(events: list[Event], rows: list[int]) -> list[Event]:
    if not rows:
        return []
    if len(rows) == 1:
        return [events[rows[0]]]
    return list(itemgetter(*rows)(events))


def _group_rows(events: list[Event]) -> dict[str, list[int]]:
    """Row indices of each group of `_GROUPS` (complete events) and of metadata events."""
    names = sorted(set(_GROUPS.values()))
    code_of = {cat: names.index(g) + 1 for cat, g in _GROUPS.items()}
    code_of.update({cat.title(): code for cat, code in code_of.items()})  # "Kernel", "Runtime", ...
    meta_code = len(names) + 1
    get = code_of.get
    codes = np.fromiter(
        (get(e.cat, 0) if e.ph == "X" else (meta_code if e.ph == "M" else 0) for e in events),
        dtype=np.int8,
        count=len(events),
    )
    # categories in other spellings (rare): classify them by their lower-case form
    unknown = [i for i in np.flatnonzero(codes == 0).tolist() if events[i].ph == "X" and events[i].cat]
    for i in unknown:
        codes[i] = code_of.get(events[i].cat.lower(), 0)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(meta_code + 2))
    groups = {g: order[bounds[k + 1] : bounds[k + 2]].tolist() for k, g in enumerate(names)}
    groups["meta"] = order[bounds[meta_code] : bounds[meta_code + 1]].tolist()
    return groups


class _Builder:
    """Holds the per-file state while the tables are built."""

    def __init__(self, path: Path, trace: TraceFile) -> None:
        self.path = path
        self.base_ns = int(trace.baseTimeNanoseconds or 0)
        self.symbols = SymbolTable()
        self.warnings: list[str] = []
        self.lane_ids: dict[tuple[int, int], int] = {}

    # -- columns shared by every group ---------------------------------------------------
    def times(self, events: list[Event]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start_ns, end_ns, keep) of events; drops those without ts/dur or with dur < 0."""
        ts = float_column([e.ts for e in events])
        dur = float_column([e.dur for e in events])
        keep = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & (np.abs(ts) < 9e15)
        ts = np.where(keep, ts, 0.0)
        dur = np.where(keep, np.minimum(dur, 9e12), 0.0)
        start = us_to_ns(ts) + self.base_ns
        return start, start + us_to_ns(dur), keep

    def lanes(self, events: list[Event]) -> np.ndarray:
        """Lane per GPU event: (args.device, args.stream), else (pid, tid) for old traces."""
        devices = int_column([_arg(e).device if _arg(e).device is not None else _pid_int(e.pid, self.symbols) for e in events])
        streams = int_column([_arg(e).stream if _arg(e).stream is not None else _pid_int(e.tid, self.symbols) for e in events])
        pairs = devices * (1 << 32) + (streams & 0xFFFFFFFF)
        uniq, inverse = np.unique(pairs, return_inverse=True)
        out = np.empty(len(uniq), dtype=np.int32)
        for k, p in enumerate(uniq):
            key = (int(p) >> 32, int(p) & 0xFFFFFFFF)
            out[k] = self.lane_ids.setdefault(key, len(self.lane_ids))
        return out[inverse] if len(events) else np.zeros(0, np.int32)

    def lane_table(self) -> np.ndarray:
        table = np.zeros((len(self.lane_ids), 2), dtype=np.int64)
        for (device, stream), lane in self.lane_ids.items():
            table[lane] = (device, stream)
        return table

    def drop_warning(self, what: str, keep: np.ndarray) -> None:
        dropped = int((~keep).sum())
        if dropped:
            self.warnings.append(f"{self.path}: {dropped} {what} without a usable ts/dur (missing, NaN or negative) were dropped")


def _arg(e: Event) -> Args:
    return e.args if e.args is not None else _EMPTY_ARGS


def _pid_int(v: int | str | None, symbols: SymbolTable) -> int:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        digits = v.strip()
        if digits.lstrip("-").isdigit():
            return int(digits)
        return 1_000_000 + symbols.id(v)  # a named lane: keep it distinct and stable
    return MISSING


def build_rank_trace(path: Path, trace: TraceFile, rank: int, warnings: tuple[str, ...] = ()) -> RankTrace:
    """Normalize one decoded trace into a `RankTrace` with the given rank."""
    b = _Builder(path, trace)
    b.warnings.extend(warnings)
    events = trace.traceEvents
    rows = _group_rows(events)

    gpu_events = _select(events, rows["gpu"])
    gpu_corr = int_column([_arg(e).correlation for e in gpu_events])
    launches = _launch_table(b, _select(events, rows["launch"]), gpu_corr)
    cpu_ops = _cpu_op_table(b, _select(events, rows["cpu_op"]), launches["external_id"])
    gpu = _gpu_table(b, gpu_events, launches, cpu_ops)
    annotations = _range_table(b, _select(events, rows["cpu_range"]), _select(events, rows["gpu_range"]))
    waits = _wait_table(b, _select(events, rows["sync"]))
    steps = step_windows(gpu, annotations, b.symbols.symbols)
    info = _info(trace, _select(events, rows["meta"]))
    di = trace.distributedInfo
    return RankTrace(
        rank=rank,
        path=path,
        world_size=di.world_size if di is not None else None,
        hostname=info.get("hostname"),
        symbols=tuple(b.symbols.symbols),
        lanes=b.lane_table(),
        gpu=gpu,
        annotations=annotations,
        waits=waits,
        steps=steps,
        warnings=tuple(b.warnings),
        info=info,
    )


def _launch_table(b: _Builder, events: list[Event], gpu_corr: np.ndarray) -> dict[str, np.ndarray]:
    """The CPU calls that launched a GPU activity of the trace (joined on correlation id)."""
    corr = int_column([_arg(e).correlation for e in events])
    used = np.isin(corr, gpu_corr) & (corr != MISSING)
    events = _select(events, np.flatnonzero(used).tolist())
    start, end, keep = b.times(events)
    ext = int_column([_arg(e).external_id for e in events])
    return {"correlation": corr[used][keep], "start_ns": start[keep], "end_ns": end[keep], "external_id": ext[keep]}


def _cpu_op_table(b: _Builder, events: list[Event], launch_ext: np.ndarray) -> dict[str, np.ndarray]:
    """The CPU ops that launched GPU work: their collective metadata and input dims."""
    ext = int_column([_arg(e).external_id for e in events])
    has = np.isin(ext, launch_ext) & (ext != MISSING)
    ops = _select(events, np.flatnonzero(has).tolist())
    args = [_arg(e) for e in ops]
    coll = [a.collective for a in args]
    return {
        "external_id": ext[has],
        "name_id": b.symbols.ids([e.name for e in ops]),
        "input_dims_id": b.symbols.ids([bytes(a.input_dims).decode() for a in args]),
        **_collective_columns(b, args, coll),
    }


def _collective_columns(b: _Builder, args: list[Args], coll: list[str | None]) -> dict[str, np.ndarray]:
    sym = b.symbols
    is_coll = np.array([c is not None for c in coll], dtype=bool)
    return {
        "coll_name_id": np.where(is_coll, sym.ids(coll), MISSING).astype(np.int32),
        "pg_name_id": np.where(is_coll, sym.ids([a.pg_name for a in args]), MISSING).astype(np.int32),
        "seq": int_column([a.seq for a in args]),
        "in_nelems": int_column([a.in_nelems for a in args]),
        "out_nelems": int_column([a.out_nelems for a in args]),
        "dtype_id": np.where(is_coll, sym.ids([a.dtype for a in args]), MISSING).astype(np.int32),
        "group_size": int_column([a.group_size for a in args]),
    }


_COLL_FIELDS = ("coll_name_id", "pg_name_id", "seq", "in_nelems", "out_nelems", "dtype_id", "group_size")


def _gpu_table(b: _Builder, events: list[Event], launches: dict, cpu_ops: dict) -> GpuActivities:
    start, end, keep = b.times(events)
    b.drop_warning("GPU activities", keep)
    events = [e for e, k in zip(events, keep) if k] if not keep.all() else events
    start, end = start[keep], end[keep]
    args = [_arg(e) for e in events]
    name_id = b.symbols.ids([e.name for e in events])
    kind = np.array([_KIND_OF_CAT[e.cat.lower()] for e in events], dtype=np.int8)
    corr = int_column([a.correlation for a in args])
    launch_start = lookup(launches["correlation"], launches["start_ns"], corr)
    launch_end = lookup(launches["correlation"], launches["end_ns"], corr)
    ext = lookup(launches["correlation"], launches["external_id"], corr)

    # Collective metadata: the kernel's own args (newer torch), else its launching CPU op's.
    own = _collective_columns(b, args, [a.collective for a in args])
    from_op = {f: lookup(cpu_ops["external_id"], cpu_ops[f], ext) for f in _COLL_FIELDS}
    use_own = own["coll_name_id"] != MISSING
    coll = {f: np.where(use_own, own[f], from_op[f]) for f in _COLL_FIELDS}
    # Only communication kernels carry collective metadata (a GEMM launched inside a
    # record_param_comms op must not inherit it).
    cls = classify(name_id, kind, b.symbols.symbols)

    input_dims = lookup(cpu_ops["external_id"], cpu_ops["input_dims_id"], ext)
    signature_id = _signatures(b, name_id, args, input_dims)

    order = np.argsort(start, kind="stable")
    table = GpuActivities(
        start_ns=start,
        end_ns=end,
        name_id=name_id,
        kind=kind,
        cls=cls,
        lane=b.lanes(events),
        correlation=corr,
        launch_start_ns=launch_start,
        launch_end_ns=launch_end,
        external_id=ext,
        signature_id=signature_id,
        **{f: coll[f].astype(np.int32 if f.endswith("_id") else np.int64) for f in _COLL_FIELDS},
    )
    table = table.take(order)
    not_comm = table.cls != ActivityClass.COMM
    for f in _COLL_FIELDS:
        getattr(table, f)[not_comm] = MISSING
    return table


def _launch_dims(values: list) -> np.ndarray:
    """(n, 3) int64 grid or block dimensions; -1 where absent or malformed."""
    out = np.full((len(values), 3), MISSING, dtype=np.int64)
    present = [i for i, v in enumerate(values) if v is not None]
    if present:
        try:
            out[present] = np.array([values[i] for i in present], dtype=np.int64).reshape(len(present), 3)
        except (ValueError, TypeError, OverflowError):
            for i in present:
                v = values[i]
                if isinstance(v, list) and len(v) == 3 and all(isinstance(x, int) and abs(x) < 2**62 for x in v):
                    out[i] = v
    return out


def _signatures(b: _Builder, name_id: np.ndarray, args: list[Args], input_dims_id: np.ndarray) -> np.ndarray:
    """Kernel signature ids (metrics.md §8): (name, grid, block, input dims), strings made once per
    distinct signature."""
    if len(name_id) == 0:
        return np.zeros(0, np.int32)
    rows = np.column_stack([
        name_id.astype(np.int64),
        _launch_dims([a.grid for a in args]),
        _launch_dims([a.block for a in args]),
        input_dims_id.astype(np.int64),
    ])
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    sym = b.symbols.symbols
    strings = [
        f"{sym[r[0]]}|grid={list(r[1:4])}|block={list(r[4:7])}|dims={sym[r[7]] if r[7] >= 0 else ''}"
        for r in uniq.tolist()
    ]
    return b.symbols.ids(strings)[inverse.ravel()]


def _range_table(b: _Builder, cpu: list[Event], gpu: list[Event]) -> Ranges:
    cs, ce, ck = b.times(cpu)
    gs, ge, gk = b.times(gpu)
    cpu = [e for e, k in zip(cpu, ck) if k]
    gpu = [e for e, k in zip(gpu, gk) if k]
    tids = int_column([_pid_int(e.tid, b.symbols) for e in cpu])
    return Ranges(
        start_ns=np.concatenate([cs[ck], gs[gk]]),
        end_ns=np.concatenate([ce[ck], ge[gk]]),
        name_id=np.concatenate([b.symbols.ids([e.name for e in cpu]), b.symbols.ids([e.name for e in gpu])]),
        on_gpu=np.concatenate([np.zeros(len(cpu), bool), np.ones(len(gpu), bool)]),
        lane=np.concatenate([np.full(len(cpu), MISSING, np.int32), b.lanes(gpu)]),
        tid=np.concatenate([tids, np.full(len(gpu), MISSING, np.int64)]),
    )


def _wait_table(b: _Builder, events: list[Event]) -> StreamWaits:
    """`cuda_sync` events. Only a `Stream Wait Event` (cudaStreamWaitEvent) makes a GPU stream wait;
    `Event Sync`, `Stream Sync` and `Context Sync` block the CPU and carry stream -1 (or 2**32 - 1),
    so their `lane` is -1. Lanes are looked up, never added: a stream without GPU activity is no lane.
    `wait_on_event_corr` is the correlation id of the `cudaEventRecord` call on `wait_on_lane`."""
    start, end, keep = b.times(events)
    events = [e for e, k in zip(events, keep) if k]
    args = [_arg(e) for e in events]
    devices = int_column([a.device if a.device is not None else _pid_int(e.pid, b.symbols) for e, a in zip(events, args)])
    streams = int_column([a.stream if a.stream is not None else _pid_int(e.tid, b.symbols) for e, a in zip(events, args)])
    wait_streams = int_column([a.wait_on_stream for a in args])
    is_stream_wait = np.array([(e.name or "") == "Stream Wait Event" for e in events], dtype=bool)
    ids = b.lane_ids

    def lane_of(device: int, stream: int) -> int:
        return ids.get((int(device), int(stream)), MISSING) if stream != MISSING else MISSING

    lane = np.array([lane_of(d, s) if w else MISSING for d, s, w in zip(devices, streams, is_stream_wait)], dtype=np.int32)
    wait_lane = np.array([lane_of(d, s) for d, s in zip(devices, wait_streams)], dtype=np.int32)
    return StreamWaits(
        start_ns=start[keep],
        end_ns=end[keep],
        name_id=b.symbols.ids([e.name for e in events]),
        lane=lane,
        wait_on_lane=wait_lane,
        wait_on_event_corr=int_column([a.wait_on_event_corr for a in args]),
        correlation=int_column([a.correlation for a in args]),
    )


def _info(trace: TraceFile, meta: list[Event]) -> dict:
    info: dict = {}
    di = trace.distributedInfo
    if di is not None:
        info.update({k: v for k, v in (("backend", di.backend), ("nccl_version", di.nccl_version)) if v})
    if trace.hostname:
        info["hostname"] = trace.hostname
    for e in meta:
        if e.name in ("hostname", "host_name") and e.args is not None and e.args.name:
            info.setdefault("hostname", e.args.name)
    return info
