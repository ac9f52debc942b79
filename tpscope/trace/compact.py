"""The map's result: one rank's tables cut to the rows the analysis and the dashboard read.

A rank's CPU ops are most of its events, and most of them (`aten::empty`, `aten::view`, the
inner ops of an op) are read by nothing. Three kinds are read (metrics.md §1, "Map results"):

- an op whose `External id` is a GPU activity's or a runtime call's: it names what a launch
  belongs to (the critical path's CPU side, §7; kernel shapes, §9). Every op with such an id
  is kept, so a lookup by id finds the same op (the last one with that id, in start order);
- a `c10d::` op: it names the collective of a comm kernel without metadata (§5);
- an outermost op of its thread, as the dashboard's CPU-thread rows draw them: an op that
  ends after every op (or runtime call) that starts before it on its thread. The outermost op
  that holds a dropped op is kept, so an op drawn from the full table is drawn from this one.

Every other table is kept whole: GPU activities, annotations, stream waits, steps and runtime
calls are each read row by row (matching, clocks, the critical path's walk).

What travels from a worker to the driver (the process pool's pipes, Ray's object store) and what
the cache stores is that `RankTrace` pickled and deflated (`PackedRank`, ISA-L at level 1: about a
sixth of the pickle, in hundredths of a second per million events), with a `RankHeader` beside it:
the few facts the reduce orders and checks ranks by. The driver keeps a large run's ranks packed
and unpacks one when a metric reads its tables (`ranks.RankList`).
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpscope.trace.beside import at_once
from tpscope.trace.columns import MISSING, sorted_unique
from tpscope.trace.tables import CpuCalls, RankTrace, StepWindows

try:  # ISA-L's deflate, as decode.py's inflate; zlib's stream format either way
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a dependency
    import zlib as _zlib

_C10D = "c10d::"


@dataclass(frozen=True, slots=True)
class RankHeader:
    """What the reduce reads of a rank without unpacking its tables: who it is, its steps, and
    the span and count of its GPU activities."""

    rank: int
    path: Path
    world_size: int | None
    hostname: str | None
    steps: StepWindows
    cpu_run: bool
    gpu_rows: int
    gpu_span_ns: tuple[int, int] | None  # first start, last end of its GPU activities
    warnings: tuple[str, ...]

    @classmethod
    def of(cls, r: RankTrace) -> RankHeader:
        g = r.gpu
        span = (int(g.start_ns.min()), int(g.end_ns.max())) if len(g) else None
        return cls(
            r.rank, r.path, r.world_size, r.hostname, r.steps, r.cpu_run, len(g), span, r.warnings
        )


@dataclass(frozen=True, slots=True)
class PackedRank:
    """One rank's map result as it travels and is stored: its `RankTrace`, pickled and deflated,
    and its header."""

    data: bytes | np.ndarray  # or a uint8 array over them (read in place from Ray's store)
    header: RankHeader

    def unpack(self) -> RankTrace:
        fields = pickle.loads(_zlib.decompress(self.data))
        for name in _TABLES:
            cls, columns = fields[name]
            fields[name] = cls(**_expand(columns))
        return RankTrace(**fields)


def header_of(item: RankTrace | PackedRank) -> RankHeader:
    """The header of a map result, packed or not."""
    return item.header if isinstance(item, PackedRank) else RankHeader.of(item)


def pack(r: RankTrace) -> PackedRank:
    """`r` pickled and deflated, its integer columns first stored as differences (below)."""
    fields = {f: getattr(r, f) for f in RankTrace.__dataclass_fields__}
    for name in _TABLES:
        table = fields[name]
        fields[name] = (type(table), _squeeze(table))
    data = _zlib.compress(pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL), 1)
    return PackedRank(data, RankHeader.of(r))


# Deflate finds repeated bytes, not small numbers: an int64 nanosecond time is eight bytes whatever
# its neighbours. Stored as the difference from the row before (an end as the difference from its
# start), in the smallest integer type that holds every difference, a rank packs to about half.
# The differences wrap as int64 arithmetic does, so every value comes back exactly.
_TABLES = ("gpu", "annotations", "waits", "steps", "cpu_ops", "runtime")
_NARROW = (np.int8, np.int16, np.int32)


@dataclass(frozen=True, slots=True)
class _Differences:
    dtype: str  # the column's own type
    values: np.ndarray
    from_start: bool  # differences from `start_ns` of the same row, else from the row before


def _squeeze(table) -> dict:
    out = {}
    for name in table.__dataclass_fields__:
        a = getattr(table, name)
        if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind != "i" or len(a) < 2:
            out[name] = a
            continue
        from_start = name == "end_ns" and hasattr(table, "start_ns")
        wide = a.astype(np.int64)
        d = wide - table.start_ns if from_start else np.diff(wide, prepend=np.int64(0))
        for t in _NARROW:
            info = np.iinfo(t)
            if d.min() >= info.min and d.max() <= info.max:
                d = d.astype(t)
                break
        out[name] = _Differences(a.dtype.str, d, from_start)
    return out


def _expand(columns: dict) -> dict:
    out = dict(columns)
    for name, c in columns.items():  # start_ns before end_ns: a table's fields are in that order
        if isinstance(c, _Differences):
            wide = c.values.astype(np.int64)
            out[name] = (out["start_ns"] + wide if c.from_start else np.cumsum(wide)).astype(
                c.dtype
            )
    return out


def compact_rank(r: RankTrace, threads: int = 1) -> RankTrace:
    """`r` with only the CPU ops that something reads (module docstring); with `threads` > 1 the
    outermost ops are found in a thread of their own meanwhile (`beside.at_once`)."""
    ops = r.cpu_ops
    if len(ops) == 0:
        return r
    read, outermost = at_once(
        lambda: _launching(ops, r) | _c10d(ops, r.symbols),
        lambda: _outermost(ops, r.runtime),
        threads,
    )
    keep = read | outermost
    if keep.all():
        return r
    return dataclasses.replace(r, cpu_ops=_take(ops, np.flatnonzero(keep)))


def _launching(ops: CpuCalls, r: RankTrace) -> np.ndarray:
    """Ops whose External id a GPU activity or a runtime call carries."""
    wanted = sorted_unique(np.concatenate([r.gpu.external_id, r.runtime.external_id]))
    wanted = wanted[wanted != MISSING]
    return np.isin(ops.external_id, wanted) & (ops.external_id != MISSING)


def _c10d(ops: CpuCalls, symbols: tuple[str, ...]) -> np.ndarray:
    named = np.array([s.startswith(_C10D) for s in symbols] + [False], bool)
    return named[np.where(ops.name_id >= 0, ops.name_id, len(symbols))]


def _outermost(ops: CpuCalls, runtime: CpuCalls) -> np.ndarray:
    """Per op: whether it ends after every earlier op and runtime call of its thread, the order
    being by start, the longer first on a tie, CPU ops before runtime calls (the dashboard's)."""
    n = len(ops)
    start = np.concatenate([ops.start_ns, runtime.start_ns])
    end = np.concatenate(
        [np.maximum(ops.end_ns, ops.start_ns), np.maximum(runtime.end_ns, runtime.start_ns)]
    )
    tid = np.concatenate([ops.tid, runtime.tid])
    order = np.lexsort((-end, start, tid))
    tid_o, end_o = tid[order], end[order]
    outer = np.ones(len(order), bool)
    bounds = np.flatnonzero(np.diff(tid_o)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(order)]):  # once per thread
        reach = np.maximum.accumulate(end_o[lo:hi])
        outer[lo + 1 : hi] = end_o[lo + 1 : hi] > reach[:-1]
    out = np.empty(len(order), bool)
    out[order] = outer
    return out[:n]


def _take(c: CpuCalls, rows: np.ndarray) -> CpuCalls:
    return CpuCalls(**{f: getattr(c, f)[rows] for f in CpuCalls.__dataclass_fields__})
