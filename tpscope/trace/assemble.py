"""Stage 2 of normalization: raw columns -> the tables of `tables.py` (metrics.md §1, §2).

Everything here works on whole arrays: lanes, the launch and CPU-op joins (correlation and
External id), classes, collective metadata, kernel signatures and step windows.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import msgspec
import numpy as np

from tpscope.trace.beside import at_once
from tpscope.trace.classify import ActivityClass, ActivityKind, classify, is_transfer_range
from tpscope.trace.columns import (
    MISSING,
    SymbolTable,
    containing,
    matching_rows,
    unique_rows,
    values_at,
)
from tpscope.trace.cpu_activities import cpu_activities, has_cpu_activity
from tpscope.trace.read.extract import COLLECTIVE_COLUMNS, RawColumns
from tpscope.trace.read.schema import TraceFile
from tpscope.trace.steps import launch_steps, step_windows
from tpscope.trace.tables import (
    CPU_LANE_DEVICE,
    CpuCalls,
    GpuActivities,
    Ranges,
    RankTrace,
    StreamWaits,
)

_DROPPED_WHAT = {
    "gpu": "GPU activities",
    "launch": "launch calls",
    "cpu_op": "CPU ops",
    "cpu_range": "CPU annotations",
    "gpu_range": "GPU annotations",
    "sync": "cuda_sync events",
}


class _Lanes:
    """Dense lane ids for (device, stream) pairs, in order of first appearance."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, int], int] = {}

    def add(self, device: np.ndarray, stream: np.ndarray) -> np.ndarray:
        if len(device) == 0:
            return np.zeros(0, np.int32)
        pairs = np.column_stack([device, stream])
        uniq, first, inverse = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        lane_of_uniq = np.empty(len(uniq), np.int32)
        for k in np.argsort(first, kind="stable").tolist():
            key = (int(uniq[k, 0]), int(uniq[k, 1]))
            lane_of_uniq[k] = self.ids.setdefault(key, len(self.ids))
        return lane_of_uniq[inverse.ravel()]

    def find(self, device: np.ndarray, stream: np.ndarray) -> np.ndarray:
        """Existing lane ids (never new ones); -1 where the pair is no lane or stream is -1."""
        return np.array(
            [
                self.ids.get((int(d), int(s)), MISSING) if s != MISSING else MISSING
                for d, s in zip(device, stream)
            ],
            dtype=np.int32,
        )

    def table(self) -> np.ndarray:
        out = np.zeros((len(self.ids), 2), dtype=np.int64)
        for (device, stream), lane in self.ids.items():
            out[lane] = (device, stream)
        return out


def assemble(
    path: Path,
    trace: TraceFile,
    raw: RawColumns,
    rank: int,
    warnings: tuple[str, ...] = (),
    threads: int = 1,
) -> RankTrace:
    """The `RankTrace` of one file from its raw columns and its header. With `threads` > 1 the
    CPU ops' and runtime calls' tables are ordered in a thread of their own meanwhile
    (`beside.at_once`)."""
    fields, (cpu_ops, runtime) = at_once(
        lambda: _activities(path, trace, raw, warnings),
        lambda: (_calls(raw.groups["cpu_op"]), _calls(raw.groups["launch"])),
        threads,
    )
    return RankTrace(rank=rank, cpu_ops=cpu_ops, runtime=runtime, **fields)


def _activities(path: Path, trace: TraceFile, raw: RawColumns, warnings: tuple[str, ...]) -> dict:
    """`assemble`'s fields but the rank and its CPU ops' and runtime calls' tables."""
    symbols = SymbolTable.from_symbols(raw.symbols)
    lanes = _Lanes()
    overlong = _drop_overlong(raw)
    di = trace.distributedInfo
    cpu_run = len(raw.groups["gpu"]["start_ns"]) == 0 and has_cpu_activity(raw)
    if cpu_run:  # metrics.md §1, "CPU runs"
        gpu = _cpu_table(raw, symbols, lanes, _only_group_size(di))
    else:
        gpu = _gpu_table(raw, symbols, lanes)
    annotations = _ranges(raw, lanes)
    if not cpu_run:
        gpu = _transfer_copies(gpu, annotations, symbols.symbols)
    waits = _waits(raw, lanes)
    launch_step = launch_steps(gpu.launch_start_ns, annotations, symbols.symbols)
    steps, step_of_activity = step_windows(
        gpu.start_ns, gpu.end_ns, launch_step, annotations, symbols.symbols, cpu_run
    )
    gpu = dataclasses.replace(gpu, step=step_of_activity)
    info = _info(trace, raw)
    notes = list(warnings)
    for group, count in raw.dropped.items():
        what = _DROPPED_WHAT.get(group, group)
        notes.append(
            f"{path}: {count} {what} without a usable ts/dur (missing, NaN or negative) were dropped"
        )
    if overlong:
        notes.append(
            f"{path}: {overlong} GPU activities lasting longer than the whole trace (a wrapped-around "
            "duration) were dropped (metrics.md §1)"
        )
    return dict(
        path=path,
        world_size=di.world_size if di is not None else None,
        hostname=info.get("hostname"),
        symbols=tuple(symbols.symbols),
        lanes=lanes.table(),
        gpu=gpu,
        annotations=annotations,
        waits=waits,
        steps=steps,
        warnings=tuple(notes),
        info=info,
        cpu_run=cpu_run,
    )


def _only_group_size(di) -> int | None:
    """The size of the trace's process group when it has one (the world), else None."""
    if di is None or not isinstance(di.world_size, int):
        return None
    try:
        groups = json.loads(bytes(di.pg_config)) if len(di.pg_config) else []
    except ValueError:
        groups = []
    return di.world_size if not isinstance(groups, list) or len(groups) <= 1 else None


def _cpu_table(
    raw: RawColumns, symbols: SymbolTable, lanes: _Lanes, group_size: int | None
) -> GpuActivities:
    """The activity table of a CPU run (trace.cpu_activities): each activity is issued at its own
    start, on its own thread, with no launch call to wait for (metrics.md §1, §7)."""
    c = cpu_activities(raw, symbols, group_size)
    n = len(c)
    missing = np.full(n, MISSING, np.int64)
    return GpuActivities(
        start_ns=c.start_ns,
        end_ns=c.end_ns,
        name_id=c.name_id,
        kind=np.full(n, ActivityKind.KERNEL, np.int8),
        cls=c.cls,
        lane=lanes.add(np.full(n, CPU_LANE_DEVICE, np.int64), c.tid),
        correlation=missing,
        launch_start_ns=c.start_ns,
        launch_end_ns=missing.copy(),  # no launch call: a CPU op's readiness is its thread's and its peers
        launch_tid=c.tid,
        step=missing.copy(),
        external_id=c.external_id,
        # metrics.md §8: a whole op is compared by its duration; a stretch of an op is not
        signature_id=np.where(
            c.whole, _cpu_signatures(symbols, c.name_id, c.dims_id), MISSING
        ).astype(np.int32),
        grid=np.full((n, 3), MISSING, np.int64),
        # a whole CPU op is its own op (§8's GEMMs); a stretch of an op or a collective is none
        op_name_id=np.where((c.coll_name_id >= 0) | ~c.whole, MISSING, c.name_id).astype(np.int32),
        dims_id=c.dims_id.astype(np.int32),
        types_id=np.full(n, MISSING, np.int32),
        strides_id=np.full(n, MISSING, np.int32),
        coll_name_id=c.coll_name_id,
        pg_name_id=c.pg_name_id,
        seq=missing.copy(),
        in_nelems=c.in_nelems,
        out_nelems=c.out_nelems,
        dtype_id=c.dtype_id,
        group_size=c.group_size,
        pg_ranks_id=np.full(n, MISSING, np.int32),  # gloo's collectives name no group ranks
        pg_desc_id=np.full(n, MISSING, np.int32),
        peer=c.peer,
        p2p_id=c.p2p_id,
    )


OVERLONG_MIN_NS = 10 * 10**9  # a trace of a few events still keeps a kernel of up to 10 s


def _drop_overlong(raw: RawColumns) -> int:
    """metrics.md §1: drop the GPU activities that end later after the trace's last start than the
    whole trace lasts (the extent of every event's start, at least 10 s): a wrapped-around duration. Returns the count."""
    starts = [c["start_ns"] for c in raw.groups.values() if len(c.get("start_ns", ())) > 0]
    g = raw.groups["gpu"]
    if not starts or len(g["start_ns"]) == 0:
        return 0
    first = min(int(s.min()) for s in starts)
    last = max(int(s.max()) for s in starts)
    keep = g["end_ns"] <= last + max(last - first, OVERLONG_MIN_NS)
    if keep.all():
        return 0
    raw.groups["gpu"] = {k: v[keep] for k, v in g.items()}
    return int((~keep).sum())


def _gpu_table(raw: RawColumns, symbols: SymbolTable, lanes: _Lanes) -> GpuActivities:
    g, launch, ops = raw.groups["gpu"], raw.groups["launch"], raw.groups["cpu_op"]
    corr = g["correlation"]
    launched_by = matching_rows(launch["correlation"], corr)  # one search for four columns
    launch_start = values_at(launch["start_ns"], launched_by)
    launch_end = values_at(launch["end_ns"], launched_by)
    launch_tid = values_at(launch["tid"], launched_by)
    ext = values_at(launch["external_id"], launched_by)
    op_of = matching_rows(ops["external_id"], ext)  # the launching op, for eight columns

    # Collective metadata: the kernel's own args (newer torch), else its launching CPU op's.
    use_own = g["coll_name_id"] != MISSING
    coll = {f: np.where(use_own, g[f], values_at(ops[f], op_of)) for f in COLLECTIVE_COLUMNS}
    cls = classify(g["name_id"], g["kind"], symbols.symbols)
    # Only communication kernels carry collective metadata (a GEMM launched inside a
    # record_param_comms op must not inherit it).
    not_comm = cls != ActivityClass.COMM
    for f in COLLECTIVE_COLUMNS:
        coll[f] = np.where(not_comm, MISSING, coll[f])
    p2p_id = _p2p_join(symbols, g["name_id"], ~not_comm, launch_tid, launch_start, coll, ops)
    dims = values_at(ops["dims_id"], op_of)
    table = GpuActivities(
        start_ns=g["start_ns"],
        end_ns=g["end_ns"],
        name_id=g["name_id"],
        kind=g["kind"],
        cls=cls,
        lane=lanes.add(g["device"], g["stream"]),
        correlation=corr,
        launch_start_ns=launch_start,
        launch_end_ns=launch_end,
        launch_tid=launch_tid,
        step=np.full(len(corr), MISSING, np.int64),
        external_id=ext,
        signature_id=_signatures(symbols, g["name_id"], g["grid"], g["block"], dims),
        grid=g["grid"],
        op_name_id=values_at(ops["name_id"], op_of).astype(np.int32),
        dims_id=dims.astype(np.int32),
        types_id=values_at(ops["types_id"], op_of).astype(np.int32),
        strides_id=values_at(ops["strides_id"], op_of).astype(np.int32),
        **{
            f: coll[f].astype(np.int32 if f.endswith("_id") else np.int64)
            for f in COLLECTIVE_COLUMNS
        },
        p2p_id=p2p_id,
    )
    return table.take(np.argsort(table.start_ns, kind="stable"))


def _transfer_copies(gpu: GpuActivities, ranges: Ranges, symbols: list[str]) -> GpuActivities:
    """metrics.md §2 "Copies that carry a transfer": a memcpy launched inside a CPU range of
    TRANSFER_RANGES, on the range's thread, is communication. One containment search per thread
    that holds such ranges (ranges of one thread do not overlap at one nesting level)."""
    copies = (
        (gpu.kind == ActivityKind.MEMCPY)
        & (gpu.cls == ActivityClass.MEMORY)
        & (gpu.launch_start_ns != MISSING)
    )
    if not copies.any() or len(ranges) == 0:
        return gpu
    transfer = ~ranges.on_gpu & is_transfer_range(ranges.name_id, symbols)
    if not transfer.any():
        return gpu
    cls = gpu.cls.copy()
    rows = np.flatnonzero(copies)
    for tid in np.unique(ranges.tid[transfer]).tolist():
        mine = rows[gpu.launch_tid[rows] == tid]
        held = transfer & (ranges.tid == tid)
        idx = containing(
            ranges.start_ns[held], ranges.end_ns[held], gpu.launch_start_ns[mine], closed=True
        )
        cls[mine[idx >= 0]] = ActivityClass.COMM
    return dataclasses.replace(gpu, cls=cls)


def _p2p_join(
    symbols: SymbolTable,
    name_id: np.ndarray,
    comm: np.ndarray,
    launch_tid: np.ndarray,
    launch_start: np.ndarray,
    coll: dict[str, np.ndarray],
    ops: dict[str, np.ndarray],
) -> np.ndarray:
    """metrics.md §5 "Point-to-point": the `send`/`recv` CPU ops each point-to-point kernel carries.

    A send/recv op belongs to the first p2p kernel (`SendRecv` in its name, or described as a send
    or recv) launched on its thread at or after the op's start: the kernel an op launches itself, or
    the one kernel that `batch_isend_irecv` launches after its ops. Per kernel, the global peers as
    "s<peer> r<peer> ..." (sorted); the kernel takes the ops' group, dtype and, as `In msg nelems`,
    the elements it sends. `coll` is updated in place.
    """
    out = np.full(len(name_id), MISSING, np.int32)
    sym = symbols.symbols
    is_p2p_name = {i: s in ("send", "recv") for i, s in enumerate(sym) if s in ("send", "recv")}
    op_coll = ops["coll_name_id"]
    op_rows = np.flatnonzero(np.isin(op_coll, list(is_p2p_name)) & (ops["peer"] != MISSING))
    if len(op_rows) == 0 or not comm.any():
        return out
    named = np.isin(coll["coll_name_id"], list(is_p2p_name))
    uniq, inverse = np.unique(name_id, return_inverse=True)
    sendrecv = np.array(["sendrecv" in sym[u].lower() for u in uniq.tolist()], bool)[
        inverse.ravel()
    ]
    kern = np.flatnonzero(comm & (sendrecv | named) & (launch_start != MISSING))
    owner = np.full(len(op_rows), -1, np.int64)
    for tid in np.unique(ops["tid"][op_rows]).tolist():  # one pass per CPU thread
        k = kern[launch_tid[kern] == tid]
        k = k[np.argsort(launch_start[k], kind="stable")]
        on = np.flatnonzero(ops["tid"][op_rows] == tid)
        at = np.searchsorted(launch_start[k], ops["start_ns"][op_rows[on]], side="left")
        ok = at < len(k)
        owner[on[ok]] = k[at[ok]]
    keep = owner >= 0
    op_rows, owner = op_rows[keep], owner[keep]
    if len(op_rows) == 0:
        return out
    ranks_of = {}
    for r in np.unique(ops["pg_ranks_id"][op_rows]).tolist():
        text = sym[r] if r >= 0 else ""
        ranks_of[r] = [int(x) for x in text.split(",")] if text else None
    send_id = symbols.id("send")
    tokens: dict[int, list[str]] = {}
    sent: dict[int, int] = {}
    for row, k in zip(op_rows.tolist(), owner.tolist()):  # one per send/recv op
        local = int(ops["peer"][row])
        members = ranks_of[int(ops["pg_ranks_id"][row])]
        peer = members[local] if members is not None and 0 <= local < len(members) else local
        is_send = int(op_coll[row]) == send_id
        tokens.setdefault(k, []).append(f"{'s' if is_send else 'r'}{peer}")
        if is_send:
            sent[k] = sent.get(k, 0) + max(int(ops["in_nelems"][row]), 0)
        if coll["pg_name_id"][k] == MISSING or not named[k]:
            for f in ("pg_name_id", "pg_ranks_id", "pg_desc_id", "dtype_id", "group_size"):
                coll[f][k] = ops[f][row]
    for k, toks in tokens.items():
        kinds = {t[0] for t in toks}
        coll["coll_name_id"][k] = symbols.id(
            "send" if kinds == {"s"} else "recv" if kinds == {"r"} else "send_recv"
        )
        coll["in_nelems"][k] = sent.get(k, 0)
        out[k] = symbols.id(" ".join(sorted(set(toks))))
    return out


def _signatures(symbols: SymbolTable, name_id, grid, block, dims_id) -> np.ndarray:
    """Kernel signature ids (metrics.md §8): (name, grid, block, input dims), one string per
    distinct signature."""
    if len(name_id) == 0:
        return np.zeros(0, np.int32)
    uniq, inverse = unique_rows(name_id, *grid.T, *block.T, dims_id)
    sym = symbols.symbols
    strings = [
        f"{sym[r[0]]}|grid={list(r[1:4])}|block={list(r[4:7])}|dims={sym[r[7]] if r[7] >= 0 else ''}"
        for r in uniq.tolist()
    ]
    return symbols.ids(strings)[inverse.ravel()]


def _cpu_signatures(symbols: SymbolTable, name_id, dims_id) -> np.ndarray:
    """CPU ops' signature ids (metrics.md §8): "name|dims=input dims", once per distinct pair."""
    if len(name_id) == 0:
        return np.zeros(0, np.int32)
    uniq, inverse = np.unique(
        np.column_stack([name_id, dims_id]).astype(np.int64), axis=0, return_inverse=True
    )
    sym = symbols.symbols
    strings = [f"{sym[a]}|dims={sym[b] if b >= 0 else ''}" for a, b in uniq.tolist()]
    return symbols.ids(strings)[inverse.ravel()]


def _calls(cols: dict[str, np.ndarray]) -> CpuCalls:
    """CPU ops or runtime calls, by start."""
    order = np.argsort(cols["start_ns"], kind="stable")
    n = len(order)
    corr = cols.get("correlation", np.full(n, MISSING, np.int64))
    return CpuCalls(
        start_ns=cols["start_ns"][order],
        end_ns=cols["end_ns"][order],
        name_id=cols["name_id"][order],
        tid=cols["tid"][order],
        external_id=cols["external_id"][order],
        correlation=corr[order],
    )


def _ranges(raw: RawColumns, lanes: _Lanes) -> Ranges:
    cpu, gpu = raw.groups["cpu_range"], raw.groups["gpu_range"]
    return Ranges(
        start_ns=np.concatenate([cpu["start_ns"], gpu["start_ns"]]),
        end_ns=np.concatenate([cpu["end_ns"], gpu["end_ns"]]),
        name_id=np.concatenate([cpu["name_id"], gpu["name_id"]]),
        on_gpu=np.concatenate(
            [np.zeros(len(cpu["name_id"]), bool), np.ones(len(gpu["name_id"]), bool)]
        ),
        lane=np.concatenate(
            [
                np.full(len(cpu["name_id"]), MISSING, np.int32),
                lanes.add(gpu["device"], gpu["stream"]),
            ]
        ),
        tid=np.concatenate([cpu["tid"], np.full(len(gpu["name_id"]), MISSING, np.int64)]),
    )


def _waits(raw: RawColumns, lanes: _Lanes) -> StreamWaits:
    """`cuda_sync` events. Only a `Stream Wait Event` (cudaStreamWaitEvent) makes a GPU stream wait;
    `Event Sync`, `Stream Sync` and `Context Sync` block the CPU and carry stream -1 (or 2**32 - 1),
    so their `lane` is -1. Lanes are looked up, never added: a stream without GPU activity is no lane.
    `wait_on_event_corr` is the correlation id of the `cudaEventRecord` call on `wait_on_lane`."""
    s = raw.groups["sync"]
    names = np.array(raw.symbols + [""], dtype=object)[
        np.where(s["name_id"] >= 0, s["name_id"], len(raw.symbols))
    ]
    is_stream_wait = names == "Stream Wait Event"
    lane = np.where(is_stream_wait, lanes.find(s["device"], s["stream"]), MISSING).astype(np.int32)
    return StreamWaits(
        start_ns=s["start_ns"],
        end_ns=s["end_ns"],
        name_id=s["name_id"],
        lane=lane,
        wait_on_lane=lanes.find(s["device"], s["wait_on_stream"]),
        wait_on_event_corr=s["wait_on_event_corr"],
        correlation=s["correlation"],
    )


def _process_groups(raw: msgspec.Raw) -> dict[str, tuple[str, tuple[int, ...]]]:
    """`distributedInfo.pg_config` as {pg_name: (pg_desc, ranks)}; entries it cannot read are left out."""
    if not raw:
        return {}
    try:
        config = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return {}
    items = (
        config.values() if isinstance(config, dict) else config if isinstance(config, list) else []
    )
    out = {}
    for pg in items:
        listed = pg.get("ranks") if isinstance(pg, dict) else None
        if isinstance(listed, str):  # '[0, 1]' in some torch versions
            listed = [
                int(x) for x in listed.strip("[] ").split(",") if x.strip().lstrip("-").isdigit()
            ]
        if isinstance(pg, dict) and "pg_name" in pg and isinstance(listed, list):
            ranks = tuple(r for r in listed if isinstance(r, int))
            out[str(pg["pg_name"])] = (str(pg.get("pg_desc", "")), ranks)
    return out


def _info(trace: TraceFile, raw: RawColumns) -> dict:
    info: dict = {}
    di = trace.distributedInfo
    if di is not None:
        info.update(
            {k: v for k, v in (("backend", di.backend), ("nccl_version", di.nccl_version)) if v}
        )
    groups = _process_groups(di.pg_config) if di is not None else {}
    if groups:
        info["process_groups"] = groups
    if di is not None and isinstance(di.pg_count, int):
        info["pg_count"] = di.pg_count
    if trace.hostname:
        info["hostname"] = trace.hostname
    elif raw.hostnames:
        info["hostname"] = raw.hostnames[0]
    return info
