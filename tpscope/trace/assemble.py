"""Stage 2 of normalization: raw columns -> the tables of `tables.py` (metrics.md §1, §2).

Everything here works on whole arrays: lanes, the launch and CPU-op joins (correlation and
External id), classes, collective metadata, kernel signatures and step windows.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from tpscope.trace.classify import ActivityClass, classify
from tpscope.trace.columns import MISSING, SymbolTable, lookup
from tpscope.trace.extract import COLLECTIVE_COLUMNS, RawColumns
from tpscope.trace.schema import TraceFile
from tpscope.trace.steps import launch_steps, step_windows
from tpscope.trace.tables import CpuCalls, GpuActivities, Ranges, RankTrace, StreamWaits

_DROPPED_WHAT = {"gpu": "GPU activities", "launch": "launch calls", "cpu_op": "CPU ops", "cpu_range": "CPU annotations",
                 "gpu_range": "GPU annotations", "sync": "cuda_sync events"}


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
            [self.ids.get((int(d), int(s)), MISSING) if s != MISSING else MISSING for d, s in zip(device, stream)],
            dtype=np.int32,
        )

    def table(self) -> np.ndarray:
        out = np.zeros((len(self.ids), 2), dtype=np.int64)
        for (device, stream), lane in self.ids.items():
            out[lane] = (device, stream)
        return out


def assemble(path: Path, trace: TraceFile, raw: RawColumns, rank: int, warnings: tuple[str, ...] = ()) -> RankTrace:
    """The `RankTrace` of one file from its raw columns and its header."""
    symbols = SymbolTable.from_symbols(raw.symbols)
    lanes = _Lanes()
    gpu = _gpu_table(raw, symbols, lanes)
    annotations = _ranges(raw, lanes)
    waits = _waits(raw, lanes)
    launch_step = launch_steps(gpu.launch_start_ns, annotations, symbols.symbols)
    steps, step_of_activity = step_windows(gpu.start_ns, gpu.end_ns, launch_step, annotations, symbols.symbols)
    gpu = dataclasses.replace(gpu, step=step_of_activity)
    info = _info(trace, raw)
    notes = list(warnings)
    for group, count in raw.dropped.items():
        what = _DROPPED_WHAT.get(group, group)
        notes.append(f"{path}: {count} {what} without a usable ts/dur (missing, NaN or negative) were dropped")
    di = trace.distributedInfo
    return RankTrace(
        rank=rank,
        path=path,
        world_size=di.world_size if di is not None else None,
        hostname=info.get("hostname"),
        symbols=tuple(symbols.symbols),
        lanes=lanes.table(),
        gpu=gpu,
        annotations=annotations,
        waits=waits,
        steps=steps,
        cpu_ops=_calls(raw.groups["cpu_op"]),
        runtime=_calls(raw.groups["launch"]),
        warnings=tuple(notes),
        info=info,
    )


def _gpu_table(raw: RawColumns, symbols: SymbolTable, lanes: _Lanes) -> GpuActivities:
    g, launch, ops = raw.groups["gpu"], raw.groups["launch"], raw.groups["cpu_op"]
    corr = g["correlation"]
    launch_start = lookup(launch["correlation"], launch["start_ns"], corr)
    launch_end = lookup(launch["correlation"], launch["end_ns"], corr)
    launch_tid = lookup(launch["correlation"], launch["tid"], corr)
    ext = lookup(launch["correlation"], launch["external_id"], corr)

    # Collective metadata: the kernel's own args (newer torch), else its launching CPU op's.
    use_own = g["coll_name_id"] != MISSING
    coll = {
        f: np.where(use_own, g[f], lookup(ops["external_id"], ops[f], ext)) for f in COLLECTIVE_COLUMNS
    }
    cls = classify(g["name_id"], g["kind"], symbols.symbols)
    # Only communication kernels carry collective metadata (a GEMM launched inside a
    # record_param_comms op must not inherit it).
    not_comm = cls != ActivityClass.COMM
    for f in COLLECTIVE_COLUMNS:
        coll[f] = np.where(not_comm, MISSING, coll[f])
    dims = lookup(ops["external_id"], ops["dims_id"], ext)
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
        **{f: coll[f].astype(np.int32 if f.endswith("_id") else np.int64) for f in COLLECTIVE_COLUMNS},
    )
    return table.take(np.argsort(table.start_ns, kind="stable"))


def _signatures(symbols: SymbolTable, name_id, grid, block, dims_id) -> np.ndarray:
    """Kernel signature ids (metrics.md §8): (name, grid, block, input dims), one string per
    distinct signature."""
    if len(name_id) == 0:
        return np.zeros(0, np.int32)
    rows = np.column_stack([name_id.astype(np.int64), grid, block, dims_id.astype(np.int64)])
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    sym = symbols.symbols
    strings = [
        f"{sym[r[0]]}|grid={list(r[1:4])}|block={list(r[4:7])}|dims={sym[r[7]] if r[7] >= 0 else ''}"
        for r in uniq.tolist()
    ]
    return symbols.ids(strings)[inverse.ravel()]


def _calls(cols: dict[str, np.ndarray]) -> CpuCalls:
    """CPU ops or runtime calls, by start."""
    order = np.argsort(cols["start_ns"], kind="stable")
    n = len(order)
    corr = cols.get("correlation", np.full(n, MISSING, np.int64))
    return CpuCalls(start_ns=cols["start_ns"][order], end_ns=cols["end_ns"][order], name_id=cols["name_id"][order],
                    tid=cols["tid"][order], external_id=cols["external_id"][order], correlation=corr[order])


def _ranges(raw: RawColumns, lanes: _Lanes) -> Ranges:
    cpu, gpu = raw.groups["cpu_range"], raw.groups["gpu_range"]
    return Ranges(
        start_ns=np.concatenate([cpu["start_ns"], gpu["start_ns"]]),
        end_ns=np.concatenate([cpu["end_ns"], gpu["end_ns"]]),
        name_id=np.concatenate([cpu["name_id"], gpu["name_id"]]),
        on_gpu=np.concatenate([np.zeros(len(cpu["name_id"]), bool), np.ones(len(gpu["name_id"]), bool)]),
        lane=np.concatenate([np.full(len(cpu["name_id"]), MISSING, np.int32), lanes.add(gpu["device"], gpu["stream"])]),
        tid=np.concatenate([cpu["tid"], np.full(len(gpu["name_id"]), MISSING, np.int64)]),
    )


def _waits(raw: RawColumns, lanes: _Lanes) -> StreamWaits:
    """`cuda_sync` events. Only a `Stream Wait Event` (cudaStreamWaitEvent) makes a GPU stream wait;
    `Event Sync`, `Stream Sync` and `Context Sync` block the CPU and carry stream -1 (or 2**32 - 1),
    so their `lane` is -1. Lanes are looked up, never added: a stream without GPU activity is no lane.
    `wait_on_event_corr` is the correlation id of the `cudaEventRecord` call on `wait_on_lane`."""
    s = raw.groups["sync"]
    names = np.array(raw.symbols + [""], dtype=object)[np.where(s["name_id"] >= 0, s["name_id"], len(raw.symbols))]
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


def _info(trace: TraceFile, raw: RawColumns) -> dict:
    info: dict = {}
    di = trace.distributedInfo
    if di is not None:
        info.update({k: v for k, v in (("backend", di.backend), ("nccl_version", di.nccl_version)) if v})
    if trace.hostname:
        info["hostname"] = trace.hostname
    elif raw.hostnames:
        info["hostname"] = raw.hostnames[0]
    return info
