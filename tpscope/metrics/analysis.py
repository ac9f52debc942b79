"""One entry point over a loaded run: every metric, as small frozen dataclasses (DESIGN.md JSON)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from tpscope import __version__
from tpscope.metrics.breakdown import StepBreakdown, class_sets, rank_breakdown
from tpscope.trace import Run


@dataclass(frozen=True, slots=True)
class Summary:
    """Whole-run figures (metrics.md §4, "Summary over a run")."""

    step_time_us: float | None
    exposed_comm_ratio: float | None
    overlap_ratio: float | None
    overlap_efficiency: float | None
    critical_path_exposed_comm_ratio: float | None = None
    contention_slowdown: float | None = None
    tokens_per_s: float | None = None
    flux_overlap_efficiency: float | None = None
    attained_saving: float | None = None


@dataclass(frozen=True, slots=True)
class RunAnalysis:
    """Everything `tpscope analyze` reports about one run."""

    run_dir: str
    ranks: list[int]
    warnings: list[str]
    steps: list[StepBreakdown]
    summary: Summary
    critical_path: list = field(default_factory=list)
    collectives: list = field(default_factory=list)
    clock_offsets_us: dict[int, float] = field(default_factory=dict)
    manifest: dict | None = None


def _sum(steps: list[StepBreakdown], attr: str) -> float:
    return float(sum(getattr(s, attr) for s in steps))


def summarize(steps: list[StepBreakdown], manifest: dict | None) -> Summary:
    """Ratios of sums over every rank and step, so long steps weigh more (metrics.md §4)."""
    if not steps:
        return Summary(None, None, None, None, tokens_per_s=_tokens_per_s(manifest))
    by_step: dict[int, float] = {}
    for s in steps:
        by_step[s.step] = max(by_step.get(s.step, 0.0), s.step_time_us)
    step_time = _sum(steps, "step_time_us")
    comm = _sum(steps, "comm_us")
    hidden = _sum(steps, "hidden_comm_us")
    hideable = float(sum(min(s.comm_us, s.compute_us) for s in steps))
    return Summary(
        step_time_us=float(np.mean(list(by_step.values()))),
        exposed_comm_ratio=_sum(steps, "exposed_comm_us") / step_time if step_time > 0 else None,
        overlap_ratio=hidden / comm if comm > 0 else None,
        overlap_efficiency=hidden / hideable if hideable > 0 else None,
        tokens_per_s=_tokens_per_s(manifest),
    )


def _tokens_per_s(manifest: dict | None) -> float | None:
    """metrics.md §9: throughput comes from the run manifest, never from a trace."""
    if not manifest:
        return None
    value = manifest.get("tokens_per_s")
    return float(value) if isinstance(value, (int, float)) else None


def analyze_run(run: Run) -> RunAnalysis:
    """Per-rank metrics of every step of `run`."""
    steps: list[StepBreakdown] = []
    for rank in run.ranks:
        steps.extend(rank_breakdown(rank, class_sets(rank)))
    return RunAnalysis(
        run_dir=str(run.path),
        ranks=run.rank_ids,
        warnings=list(run.warnings),
        steps=steps,
        summary=summarize(steps, run.manifest),
        manifest=run.manifest,
    )


def as_json(analysis: RunAnalysis) -> dict:
    """The JSON document of `tpscope analyze --json` (DESIGN.md): a plain dump of the dataclasses."""
    doc = {"tpscope_version": __version__}
    for f in dataclasses.fields(analysis):
        if f.name == "manifest":
            continue
        value = getattr(analysis, f.name)
        if f.name == "clock_offsets_us":
            value = {str(k): v for k, v in value.items()}
        doc[f.name] = _plain(value)
    return doc


def _plain(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
