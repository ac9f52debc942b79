"""A decoded trace file -> the columnar tables of `tables.py`: extraction, then assembly."""

from __future__ import annotations

from pathlib import Path

from tpscope.trace.assemble import assemble
from tpscope.trace.extract import extract
from tpscope.trace.schema import TraceFile
from tpscope.trace.tables import RankTrace


def build_rank_trace(path: Path, trace: TraceFile, rank: int, warnings: tuple[str, ...] = ()) -> RankTrace:
    """Normalize one decoded trace into a `RankTrace` with the given rank (one process)."""
    raw = extract(trace.traceEvents, int(trace.baseTimeNanoseconds or 0))
    return assemble(path, trace, raw, rank, warnings)
