"""The metrics a report compares: names, units, which way is better (a data table)."""

from __future__ import annotations

from dataclasses import dataclass

from tpscope.numbers import number


@dataclass(frozen=True, slots=True)
class MetricDef:
    """One comparable metric. `name` carries the unit; `short` is the name `--fail-on` uses."""

    name: str
    short: str
    label: str
    unit: str  # "us", "ratio", "bytes", "tokens/s"
    lower_is_better: bool
    source: str  # where its per-step samples come from (metrics.md section or the manifest)

    @property
    def nominal_change(self) -> float:
        """Without a noise estimate (< 3 steps) and without a threshold, a smaller change is
        "unchanged": 0.5 percentage points of a ratio, 1% of anything else."""
        return 0.005 if self.unit == "ratio" else 0.01

    @property
    def nominal_text(self) -> str:
        return "±0.5 pp" if self.unit == "ratio" else "±1%"


METRICS: tuple[MetricDef, ...] = (
    MetricDef("step_time_us", "step_time", "step time (slowest rank)", "us", True, "trace §4"),
    MetricDef(
        "exposed_comm_ratio",
        "exposed_comm_ratio",
        "exposed communication / step",
        "ratio",
        True,
        "trace §4",
    ),
    MetricDef("tokens_per_s", "tokens_per_s", "tokens/s", "tokens/s", False, "manifest"),
    MetricDef("peak_memory_bytes", "peak_memory", "peak GPU memory", "bytes", True, "manifest"),
    MetricDef(
        "exposed_comm_us",
        "exposed_comm",
        "exposed communication (mean rank)",
        "us",
        True,
        "trace §4",
    ),
    MetricDef("comm_us", "comm", "communication (mean rank)", "us", True, "trace §4"),
    MetricDef("compute_us", "compute", "compute (mean rank)", "us", True, "trace §4"),
    MetricDef("idle_us", "idle", "idle (mean rank)", "us", True, "trace §4"),
    MetricDef(
        "overlap_ratio", "overlap_ratio", "hidden / all communication", "ratio", False, "trace §4"
    ),
    MetricDef(
        "hidden_of_hideable_ratio",
        "hidden_of_hideable_ratio",
        "hidden / hideable communication",
        "ratio",
        False,
        "trace §4",
    ),
    MetricDef(
        "comm_wait_us", "comm_wait", "communication waiting (mean rank)", "us", True, "trace §5"
    ),
    MetricDef(
        "critical_path_exposed_comm_ratio",
        "critical_path_exposed_comm_ratio",
        "critical-path exposed communication",
        "ratio",
        True,
        "trace §7",
    ),
    MetricDef(
        "contention_slowdown",
        "contention_slowdown",
        "compute slowdown under communication",
        "ratio",
        True,
        "trace §8",
    ),
)

_BY_NAME = {n: m for m in METRICS for n in (m.name, m.short)}


def metric_def(name: str) -> MetricDef:
    """The metric called `name` (its full or short name); KeyError when there is none."""
    return _BY_NAME[name.strip().lower()]


def format_value(value: float | None, unit: str) -> str:
    """A value for a table, in the metric's unit; '-' when unknown (tpscope.numbers)."""
    return number(value, unit)


def format_delta(delta: float | None, unit: str) -> str:
    """A signed change in the metric's unit (ratios as percentage points)."""
    return number(delta, unit, signed=True)
