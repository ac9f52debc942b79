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
sixth of the pickle, in hundredths of a second per million events); the driver unpacks it for
the reduce.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass

import numpy as np

from tpscope.trace.columns import MISSING
from tpscope.trace.tables import CpuCalls, RankTrace

try:  # ISA-L's deflate, as decode.py's inflate; zlib's stream format either way
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a dependency
    import zlib as _zlib

_C10D = "c10d::"


@dataclass(frozen=True, slots=True)
class PackedRank:
    """One rank's map result as it travels and is stored: its `RankTrace`, pickled and deflated."""

    data: bytes

    def unpack(self) -> RankTrace:
        return pickle.loads(_zlib.decompress(self.data))


def pack(r: RankTrace) -> PackedRank:
    return PackedRank(_zlib.compress(pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL), 1))


def compact_rank(r: RankTrace) -> RankTrace:
    """`r` with only the CPU ops that something reads (module docstring)."""
    ops = r.cpu_ops
    if len(ops) == 0:
        return r
    keep = _launching(ops, r) | _c10d(ops, r.symbols) | _outermost(ops, r.runtime)
    if keep.all():
        return r
    return dataclasses.replace(r, cpu_ops=_take(ops, np.flatnonzero(keep)))


def _launching(ops: CpuCalls, r: RankTrace) -> np.ndarray:
    """Ops whose External id a GPU activity or a runtime call carries."""
    wanted = np.unique(np.concatenate([r.gpu.external_id, r.runtime.external_id]))
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
