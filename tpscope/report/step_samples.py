"""Per-step samples of each comparable metric, taken from a `RunAnalysis` and its manifest.

One value per step (a step's ranks are not independent samples): step time is the slowest rank's
(as in the summary), ratios are ratios of sums over the step's ranks (metrics.md §4, "Summary"),
times in µs are means over the ranks. Tokens/s per step come from the manifest's step wall times
over its timed steps (metrics.md §9); peak memory is the manifest's one figure. A metric the run
cannot give is absent, with a note that says why; it is never 0. The first profiled step (a
warm-up, metrics.md §3) is listed in `steps` and kept apart (`first_step`, `first_step_time_us`):
no sample holds it, so no median, mean or comparison does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from tpscope.metrics import RunAnalysis
from tpscope.runfolder.manifest import Manifest

MEAN_US_FIELDS = ("exposed_comm_us", "comm_us", "compute_us", "idle_us", "comm_wait_us")


@dataclass(frozen=True, slots=True)
class RunSamples:
    """Per-step samples of one run: metric name -> float array; `missing`: metric -> why."""

    run_dir: str
    steps: tuple[int, ...]  # every profiled step, the first included
    values: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    missing: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    first_step: int | None = None  # the first profiled step, left out of every sample (§3)
    first_step_time_us: float | None = None  # its step time (slowest rank), shown beside them

    def get(self, metric: str) -> np.ndarray:
        return self.values.get(metric, np.zeros(0))


def _step_table(rows: list, names: tuple[str, ...]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Columns of the (rank, step) rows: NaN where a field is None."""
    steps = np.array([s.step for s in rows], dtype=np.int64)
    cols = {
        n: np.array(
            [np.nan if getattr(s, n) is None else getattr(s, n) for s in rows],
            dtype=float,
        )
        for n in names
    }
    return steps, cols


def _by_step(steps: np.ndarray, uniq: np.ndarray, values: np.ndarray, how: str) -> np.ndarray:
    """Reduce the rows of each step: 'max', 'sum' or 'mean' (NaN rows left out; NaN if all are)."""
    idx = np.searchsorted(uniq, steps)
    ok = np.isfinite(values)
    count = np.bincount(idx[ok], minlength=len(uniq)).astype(float)
    if how == "max":
        out = np.full(len(uniq), -np.inf)
        np.maximum.at(out, idx[ok], values[ok])
    else:
        out = np.bincount(idx[ok], weights=values[ok], minlength=len(uniq))
        if how == "mean":
            out = out / np.maximum(count, 1)
    return np.where(count > 0, out, np.nan)


def first_step(analysis: RunAnalysis) -> tuple[int | None, float | None]:
    """The first profiled step's number and step time (its slowest rank), None when not marked."""
    rows = [s for s in analysis.steps if s.first_step]
    if not rows:
        return None, None
    return rows[0].step, max(s.step_time_us for s in rows)


def trace_samples(analysis: RunAnalysis) -> tuple[tuple[int, ...], dict[str, np.ndarray]]:
    """Per-step samples of the trace metrics (metrics.md §4, §5, §7, §8), without the first
    profiled step (§3); the steps returned are all of them."""
    names = (
        "step_time_us",
        "exposed_comm_us",
        "hidden_comm_us",
        "comm_us",
        "compute_us",
        "idle_us",
        "memory_us",
        "comm_wait_us",
        "contention_tax_us",
        "contention_slowdown",
    )
    every = tuple(sorted({s.step for s in analysis.steps}))
    steady = [s for s in analysis.steps if not s.first_step]
    steps, c = _step_table(steady, names)
    if len(steps) == 0:
        return every, {}
    uniq = np.unique(steps)
    hideable = np.minimum(c["comm_us"], c["compute_us"])
    sum_step = _by_step(steps, uniq, c["step_time_us"], "sum")
    sum_comm = _by_step(steps, uniq, c["comm_us"], "sum")
    sum_hidden = _by_step(steps, uniq, c["hidden_comm_us"], "sum")
    sum_hideable = _by_step(steps, uniq, hideable, "sum")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "step_time_us": _by_step(steps, uniq, c["step_time_us"], "max"),
            "exposed_comm_ratio": np.where(
                sum_step > 0, _by_step(steps, uniq, c["exposed_comm_us"], "sum") / sum_step, np.nan
            ),
            "overlap_ratio": np.where(sum_comm > 0, sum_hidden / sum_comm, np.nan),
            "hidden_of_hideable_ratio": np.where(
                sum_hideable > 0, sum_hidden / sum_hideable, np.nan
            ),
            "contention_slowdown": _by_step(steps, uniq, c["contention_slowdown"], "mean"),
        }
    for n in MEAN_US_FIELDS:
        out[n] = _by_step(steps, uniq, c[n], "mean")
    out["memory_us"] = _by_step(steps, uniq, c["memory_us"], "mean")
    out["hidden_comm_us"] = _by_step(steps, uniq, c["hidden_comm_us"], "mean")
    out["rank_step_time_us"] = _by_step(steps, uniq, c["step_time_us"], "mean")  # for the breakdown
    cp = [
        (getattr(p, "step", None), getattr(p, "exposed_comm_ratio", None))
        for p in analysis.critical_path
        if not getattr(p, "first_step", False)
    ]
    cp_vals = np.array([v for s, v in cp if s is not None and v is not None], dtype=float)
    if len(cp_vals):
        out["critical_path_exposed_comm_ratio"] = cp_vals
    return every, {k: v[np.isfinite(v)] for k, v in out.items()}


def manifest_samples(manifest: Manifest | None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """tokens/s per timed step and peak memory, from `tpscope_run.jsonc` (metrics.md §9)."""
    if manifest is None:
        why = "no tpscope_run.jsonc manifest in the run folder"
        return {}, {"tokens_per_s": why, "peak_memory_bytes": why}
    values: dict[str, np.ndarray] = {}
    missing: dict[str, str] = {}
    times_ms = np.asarray(manifest.step_times_ms, dtype=float) if manifest.step_times_ms else None
    timed = manifest.timed_steps
    tokens = manifest.tokens_per_step
    if times_ms is not None and tokens is not None:  # the manifest's types: metrics.md §9
        if timed and all(i < len(times_ms) for i in timed):
            times_ms = times_ms[np.asarray(timed)]
        times_ms = times_ms[times_ms > 0]
        values["tokens_per_s"] = tokens / (times_ms / 1e3)
    elif manifest.tokens_per_s is not None:
        values["tokens_per_s"] = np.array([float(manifest.tokens_per_s)])
    else:
        missing["tokens_per_s"] = "the manifest has no tokens_per_s nor per-step times"
    peak = manifest.peak_memory_bytes
    if peak is not None and peak > 0:
        values["peak_memory_bytes"] = np.array([float(peak)])
    else:
        missing["peak_memory_bytes"] = "the manifest has no peak_memory_bytes"
    return values, missing


def run_samples(analysis: RunAnalysis) -> RunSamples:
    """Every metric's per-step samples of one analyzed run."""
    steps, values = trace_samples(analysis)
    missing = {k: "no step with a value in the trace" for k, v in values.items() if len(v) == 0}
    values = {k: v for k, v in values.items() if len(v)}
    m_values, m_missing = manifest_samples(analysis.manifest)
    values.update(m_values)
    missing.update(m_missing)
    first, first_us = first_step(analysis)
    return RunSamples(
        analysis.run_dir,
        steps,
        MappingProxyType(values),
        MappingProxyType(missing),
        first,
        first_us,
    )
