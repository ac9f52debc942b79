"""Pure functions over the event tables: intervals, overlap, critical path, contention."""

from tpscope.metrics.analysis import RunAnalysis, Summary, analyze_run, as_json
from tpscope.metrics.breakdown import StepBreakdown

__all__ = ["RunAnalysis", "StepBreakdown", "Summary", "analyze_run", "as_json"]
