"""Noise-aware comparison of two runs, metric by metric, over per-step samples (pure functions).

For each metric the point estimate is the difference of medians, candidate minus baseline; its
noise is a 95% percentile-bootstrap interval of that difference (steps resampled with replacement
in each run, a fixed seed so that a report is reproducible). A change whose interval holds 0 is
"unchanged" and never fails. A change fails ("regressed") when it is outside the noise and past
its threshold in the bad direction. With fewer than `MIN_SAMPLES` values in either run (a single
manifest figure such as peak memory, two profiled steps) there is no noise estimate and the
threshold stands in for it: a gated change within it either way is "unchanged".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from tpscope.errors import UserError
from tpscope.report.metric_defs import METRICS, format_delta, metric_def

MIN_SAMPLES = 3
CONFIDENCE = 0.95
N_BOOTSTRAP = 4000
SEED = 20_260_101  # fixed: the same runs give the same report

DEFAULT_FAIL_ON = "step_time=+3%,exposed_comm_ratio=+0.02,tokens_per_s=-3%,peak_memory=+5%"


class Status(str, Enum):
    """What happened to one metric between baseline and candidate."""

    REGRESSED = "regressed"  # worse, outside the noise, past the threshold: fails
    WORSE = "worse"  # worse and outside the noise, within the threshold
    IMPROVED = "improved"  # better and outside the noise
    UNCHANGED = "unchanged"  # the difference is inside the noise (or exactly 0)
    UNKNOWN = "unknown"  # no value in one of the runs


@dataclass(frozen=True, slots=True)
class Threshold:
    """Fail when `metric` moves by more than `limit` in direction `worse_if` (+1 up, -1 down);
    `limit` is a fraction of the baseline median when `relative`, else in the metric's unit."""

    metric: str
    limit: float
    relative: bool
    worse_if: int

    def allowed(self, baseline_median: float) -> float:
        """The largest change in the bad direction that still passes, in the metric's unit."""
        return self.limit * abs(baseline_median) if self.relative else self.limit

    @property
    def text(self) -> str:
        sign = "+" if self.worse_if > 0 else "-"
        return f"{sign}{self.limit * 100:g}%" if self.relative else f"{sign}{self.limit:g}"


@dataclass(frozen=True, slots=True)
class FailOn:
    """The thresholds of `--fail-on`, one per metric at most."""

    thresholds: tuple[Threshold, ...]

    def get(self, metric: str) -> Threshold | None:
        return next((t for t in self.thresholds if t.metric == metric), None)

    @property
    def spec(self) -> str:
        return ",".join(f"{metric_def(t.metric).short}={t.text}" for t in self.thresholds)


def parse_fail_on(spec: str | None, defaults: str = DEFAULT_FAIL_ON) -> FailOn:
    """`--fail-on` SPEC: comma-separated `METRIC=[+|-]LIMIT[%]` entries (`METRIC=off` drops one).

    Entries replace the default for their metric; the other defaults stay. `+` fails on a rise,
    `-` on a fall; no sign means the metric's bad direction. `%` makes the limit relative to the
    baseline median, otherwise it is in the metric's unit (a ratio for `*_ratio`).
    """
    table: dict[str, Threshold | None] = {}
    for source in (defaults, spec or ""):
        for entry in filter(None, (e.strip() for e in source.split(","))):
            name, threshold = _parse_entry(entry)
            table[name] = threshold
    return FailOn(tuple(t for t in table.values() if t is not None))


def _parse_entry(entry: str) -> tuple[str, Threshold | None]:
    name, sep, value = (p.strip() for p in entry.partition("="))
    if not sep or not name or not value:
        raise UserError(f"--fail-on: {entry!r} is not METRIC=LIMIT (e.g. step_time=+3%)")
    try:
        m = metric_def(name)
    except KeyError:
        known = ", ".join(d.short for d in METRICS)
        raise UserError(f"--fail-on: unknown metric {name!r}; known: {known}") from None
    if value.lower() == "off":
        return m.name, None
    sign = {"+": 1, "-": -1}.get(value[0], 0)
    number = value[1:] if sign else value
    relative = number.endswith("%")
    try:
        limit = float(number[:-1] if relative else number)
    except ValueError:
        raise UserError(f"--fail-on: {entry!r}: {value!r} is not a number like +3% or +0.02") from None
    if not np.isfinite(limit) or limit < 0:
        raise UserError(f"--fail-on: {entry!r}: the limit must be a finite number >= 0")
    worse_if = sign or (1 if m.lower_is_better else -1)
    return m.name, Threshold(m.name, limit / 100 if relative else limit, relative, worse_if)


def nominal_tolerance(m, baseline_median: float) -> float:
    """What an ungated metric without a noise estimate may move and still be called unchanged."""
    return m.nominal_change * (1.0 if m.unit == "ratio" else abs(baseline_median))


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric, baseline -> candidate."""

    metric: str
    status: Status
    reason: str  # one line: why this status
    baseline_median: float | None
    candidate_median: float | None
    n_baseline: int
    n_candidate: int
    delta: float | None = None  # median(candidate) - median(baseline)
    delta_ratio: float | None = None  # delta / |median(baseline)|
    ci_low: float | None = None  # bootstrap interval of delta (None: too few samples)
    ci_high: float | None = None
    significant: bool | None = None  # None: no noise estimate
    threshold: Threshold | None = None

    @property
    def failed(self) -> bool:
        return self.status is Status.REGRESSED


def median_difference_ci(baseline: np.ndarray, candidate: np.ndarray,
                         confidence: float = CONFIDENCE, n_boot: int = N_BOOTSTRAP,
                         seed: int = SEED) -> tuple[float, float]:
    """Percentile-bootstrap interval of median(candidate) - median(baseline)."""
    rng = np.random.default_rng(seed)
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    mb = np.median(b[rng.integers(0, len(b), size=(n_boot, len(b)))], axis=1)
    mc = np.median(c[rng.integers(0, len(c), size=(n_boot, len(c)))], axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(mc - mb, [alpha, 1 - alpha])
    return float(low), float(high)


def compare_metric(metric: str, baseline: np.ndarray, candidate: np.ndarray,
                   threshold: Threshold | None, missing: str = "") -> MetricComparison:
    """Status of one metric from its per-step samples in each run (see the module docstring)."""
    m = metric_def(metric)
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    mb = float(np.median(b)) if len(b) else None
    mc = float(np.median(c)) if len(c) else None
    if mb is None or mc is None:
        which = "baseline" if mb is None else "candidate"
        why = missing or f"no value in the {which}"
        return MetricComparison(metric, Status.UNKNOWN, why, mb, mc, len(b), len(c), threshold=threshold)
    delta = mc - mb
    ratio = delta / abs(mb) if mb != 0 else None
    low = high = significant = None
    if min(len(b), len(c)) >= MIN_SAMPLES:
        low, high = median_difference_ci(b, c)
        significant = low > 0 or high < 0
    worse_if = threshold.worse_if if threshold else (1 if m.lower_is_better else -1)
    worse_by = worse_if * delta
    past = threshold is not None and worse_by > threshold.allowed(mb)
    noise = "" if significant is not None else f" (fewer than {MIN_SAMPLES} values: no noise estimate)"
    if delta == 0 or significant is False:
        status, why = Status.UNCHANGED, "difference inside the step-to-step noise" if delta else "identical"
    elif significant is None and threshold is not None and abs(delta) <= threshold.allowed(mb):
        # no noise estimate: the threshold stands in for it, in both directions
        status, why = Status.UNCHANGED, f"within ±{threshold.text[1:]}{noise}"
    elif significant is None and threshold is None and abs(delta) <= nominal_tolerance(m, mb):
        status, why = Status.UNCHANGED, f"within the nominal {m.nominal_text}{noise}"
    elif past:
        moved = "rose" if threshold.worse_if > 0 else "fell"
        status, why = Status.REGRESSED, f"{moved} by more than {threshold.text[1:]}{noise}"
    elif worse_by > 0:
        status = Status.WORSE
        why = f"worse, within {threshold.text}{noise}" if threshold else f"worse (no threshold){noise}"
    else:
        status, why = Status.IMPROVED, f"better{noise}"
    return MetricComparison(metric, status, why, mb, mc, len(b), len(c), delta, ratio, low, high,
                            significant, threshold)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The one-line outcome of a comparison."""

    passed: bool
    regressed: tuple[str, ...]
    improved: tuple[str, ...]
    line: str


def verdict(comparisons: tuple[MetricComparison, ...] | list[MetricComparison]) -> Verdict:
    """Fail when any metric regressed; the line names the regressed metrics first."""
    bad = tuple(c for c in comparisons if c.failed)
    good = tuple(c.metric for c in comparisons if c.status is Status.IMPROVED and c.threshold)
    if bad:
        parts = [f"{metric_def(c.metric).short} {_delta_text(c)} (limit {c.threshold.text})" for c in bad]
        return Verdict(False, tuple(c.metric for c in bad), good, "REGRESSION: " + "; ".join(parts))
    gated = [c for c in comparisons if c.threshold is not None]
    unknown = [metric_def(c.metric).short for c in gated if c.status is Status.UNKNOWN]
    worse = [f"{metric_def(c.metric).short} {_delta_text(c)}" for c in gated if c.status is Status.WORSE]
    line = f"PASS: no gated metric regressed past its threshold ({len(gated) - len(unknown)} checked"
    line += f", {len(good)} improved" if good else ""
    line += f"; worse within the limits: {', '.join(worse)}" if worse else ""
    line += f"; unknown: {', '.join(unknown)})" if unknown else ")"
    return Verdict(True, (), good, line)


def _delta_text(c: MetricComparison) -> str:
    if c.delta is None:
        return "?"
    if c.threshold is not None and c.threshold.relative and c.delta_ratio is not None:
        return f"{c.delta_ratio * 100:+.1f}%"
    return format_delta(c.delta, metric_def(c.metric).unit)


def compare_runs(baseline, candidate, fail_on: FailOn) -> tuple[MetricComparison, ...]:
    """Every metric that either run has, or that a threshold gates, in `METRICS` order.

    `baseline` and `candidate` are `step_samples.RunSamples` (per-metric arrays and notes).
    """
    out = []
    for m in METRICS:
        b, c = baseline.get(m.name), candidate.get(m.name)
        threshold = fail_on.get(m.name)
        if not len(b) and not len(c) and threshold is None:
            continue
        missing = candidate.missing.get(m.name) or baseline.missing.get(m.name, "")
        if not len(b) and baseline.missing.get(m.name):
            missing = "baseline: " + baseline.missing[m.name]
        elif not len(c) and candidate.missing.get(m.name):
            missing = "candidate: " + candidate.missing[m.name]
        out.append(compare_metric(m.name, b, c, threshold, missing))
    return tuple(out)
