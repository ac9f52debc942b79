"""Reading run folders: discovery, decoding, classification, steps (files -> tables)."""

from tpscope.trace.classify import ActivityClass, ActivityKind, is_sync
from tpscope.trace.run_folder import Run, find_runs, find_trace_files, load_rank_file, load_run
from tpscope.trace.tables import (
    CpuCalls,
    GpuActivities,
    Ranges,
    RankTrace,
    StepWindows,
    StreamWaits,
)

__all__ = [
    "ActivityClass",
    "ActivityKind",
    "CpuCalls",
    "GpuActivities",
    "Ranges",
    "RankTrace",
    "Run",
    "StepWindows",
    "StreamWaits",
    "find_runs",
    "find_trace_files",
    "is_sync",
    "load_rank_file",
    "load_run",
]
