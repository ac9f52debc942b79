"""Pure functions over the event tables: intervals, overlap, critical path, contention.

The package's names load on first use (PEP 562), so that a module of it imports only what it
needs: `tpscope bench` reads the Flux formulas (tpscope.metrics.flux) on a GPU machine without
the trace reader's libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpscope.metrics.analysis import RunAnalysis, Summary, analyze_run, as_json
    from tpscope.metrics.breakdown import StepBreakdown

_WHERE = {
    "RunAnalysis": "tpscope.metrics.analysis",
    "Summary": "tpscope.metrics.analysis",
    "analyze_run": "tpscope.metrics.analysis",
    "as_json": "tpscope.metrics.analysis",
    "StepBreakdown": "tpscope.metrics.breakdown",
}

__all__ = ["RunAnalysis", "StepBreakdown", "Summary", "analyze_run", "as_json"]


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
