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

from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from tpscope.errors import UserError
from tpscope.report.metric_defs import (
    METRICS,
    MetricDef,
    format_delta,
    format_value,
    metric_def,
    number,
)

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

    @property
    def shown(self) -> str:
        """The limit as a person reads it next to a change: in the metric's unit."""
        sign = "+" if self.worse_if > 0 else "-"
        if self.relative:
            return f"{sign}{self.limit * 100:g}%"
        try:  # in the metric's unit, as its changes print: a ratio's in percentage points
            unit = metric_def(self.metric).unit
        except KeyError:
            unit = ""
        if unit == "ratio":
            return f"{sign}{self.limit * 100:g} pp"
        return f"{sign}{self.limit:g}" + (" µs" if unit == "us" else "")


@dataclass(frozen=True, slots=True)
class Bound:
    """Fail when the candidate's median of `metric` is above `value` (`upper`) or below it, whatever
    the baseline: a ceiling such as the memory the job has, or a floor such as a throughput target."""

    metric: str
    value: float
    upper: bool

    @property
    def text(self) -> str:
        return f"{'<=' if self.upper else '>='}{_bound_value_text(self.value, metric_def(self.metric).unit)}"

    def violated_by(self, candidate_median: float) -> bool:
        return candidate_median > self.value if self.upper else candidate_median < self.value


@dataclass(frozen=True, slots=True)
class FailOn:
    """The thresholds (changes against the baseline) and bounds (absolute) of `--fail-on`."""

    thresholds: tuple[Threshold, ...]
    bounds: tuple[Bound, ...] = ()

    def get(self, metric: str) -> Threshold | None:
        return next((t for t in self.thresholds if t.metric == metric), None)

    def bound(self, metric: str) -> Bound | None:
        return next((b for b in self.bounds if b.metric == metric), None)

    @property
    def spec(self) -> str:
        parts = [f"{metric_def(t.metric).short}={t.text}" for t in self.thresholds]
        return ",".join(parts + [f"{metric_def(b.metric).short}{b.text}" for b in self.bounds])


BYTE_UNITS = {
    "tib": 1 << 40,
    "gib": 1 << 30,
    "mib": 1 << 20,
    "kib": 1 << 10,
    "tb": 10**12,
    "gb": 10**9,
    "mb": 10**6,
    "kb": 10**3,
    "b": 1,
}


def _bound_value_text(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value / (1 << 30):g}GiB"
    if unit == "ratio":
        return f"{value * 100:g}%"
    return f"{value:g}"


def _parse_bound(entry: str, m: MetricDef, op: str, text: str) -> Bound:
    """`METRIC<=VALUE` or `METRIC>=VALUE`: bytes take a unit (75GiB), ratios may take %."""
    low = text.strip().lower()
    scale = 1.0
    if m.unit == "bytes":
        unit = next((u for u in BYTE_UNITS if low.endswith(u)), "")
        scale, low = float(BYTE_UNITS.get(unit, 1)), low[: len(low) - len(unit)]
    elif m.unit == "ratio" and low.endswith("%"):
        scale, low = 0.01, low[:-1]
    try:
        value = float(low) * scale
    except ValueError:
        raise UserError(
            f"--fail-on: {entry!r}: {text.strip()!r} is not a number like 75GiB or 0.3"
        ) from None
    if not np.isfinite(value):
        raise UserError(f"--fail-on: {entry!r}: the bound must be a finite number")
    return Bound(m.name, value, op == "<=")


def parse_fail_on(spec: str | None, defaults: str = DEFAULT_FAIL_ON) -> FailOn:
    """`--fail-on` SPEC: comma-separated entries, each `METRIC=[+|-]LIMIT[%]` (a change against the
    baseline), `METRIC<=VALUE` or `METRIC>=VALUE` (a bound on the candidate), or `METRIC=off`.

    Entries replace the default for their metric; the other defaults stay. `+` fails on a rise,
    `-` on a fall; no sign means the metric's bad direction. `%` makes the limit relative to the
    baseline median, otherwise it is in the metric's unit (a ratio for `*_ratio`). `off` drops the
    metric's threshold and bound.
    """
    table: dict[str, Threshold | None] = {}
    bounds: dict[str, Bound | None] = {}
    for source in (defaults, spec or ""):
        for entry in filter(None, (e.strip() for e in source.split(","))):
            name, item = _parse_entry(entry)
            if isinstance(item, Bound):
                bounds[name] = item
            else:
                table[name] = item
                if item is None:
                    bounds[name] = None
    return FailOn(
        tuple(t for t in table.values() if t is not None),
        tuple(b for b in bounds.values() if b is not None),
    )


def _parse_entry(entry: str) -> tuple[str, Threshold | Bound | None]:
    op = next((o for o in ("<=", ">=") if o in entry), "=")
    name, sep, value = (p.strip() for p in entry.partition(op))
    if not sep or not name or not value:
        raise UserError(
            f"--fail-on: {entry!r} is not METRIC=LIMIT or METRIC<=VALUE (e.g. step_time=+3%)"
        )
    try:
        m = metric_def(name)
    except KeyError:
        known = ", ".join(d.short for d in METRICS)
        raise UserError(f"--fail-on: unknown metric {name!r}; known: {known}") from None
    if op != "=":
        return m.name, _parse_bound(entry, m, op, value)
    if value.lower() == "off":
        return m.name, None
    sign = {"+": 1, "-": -1}.get(value[0], 0)
    number = value[1:] if sign else value
    relative = number.endswith("%")
    try:
        limit = float(number[:-1] if relative else number)
    except ValueError:
        raise UserError(
            f"--fail-on: {entry!r}: {value!r} is not a number like +3% or +0.02"
        ) from None
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
    past_threshold: bool = False  # regressed by the threshold (outside the noise, past the limit)
    bound: Bound | None = None
    bound_violated: bool = False  # the candidate's median is beyond the bound

    @property
    def failed(self) -> bool:
        return self.status is Status.REGRESSED

    @property
    def gates(self) -> str:
        """The limits that apply, as `--fail-on` writes them."""
        return "; ".join(
            x
            for x in (
                self.threshold.text if self.threshold else "",
                self.bound.text if self.bound else "",
            )
            if x
        )


def median_difference_ci(
    baseline: np.ndarray,
    candidate: np.ndarray,
    confidence: float = CONFIDENCE,
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of median(candidate) - median(baseline)."""
    rng = np.random.default_rng(seed)
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    mb = np.median(b[rng.integers(0, len(b), size=(n_boot, len(b)))], axis=1)
    mc = np.median(c[rng.integers(0, len(c), size=(n_boot, len(c)))], axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(mc - mb, [alpha, 1 - alpha])
    return float(low), float(high)


def compare_metric(
    metric: str,
    baseline: np.ndarray,
    candidate: np.ndarray,
    threshold: Threshold | None,
    missing: str = "",
    bound: Bound | None = None,
) -> MetricComparison:
    """Status of one metric from its per-step samples in each run (see the module docstring); a
    candidate beyond `bound` regresses whatever the baseline says."""
    c = _compare(metric, baseline, candidate, threshold, missing)
    if bound is None:
        return c
    if c.candidate_median is None or not bound.violated_by(c.candidate_median):
        return replace(c, bound=bound)
    value = format_value(c.candidate_median, metric_def(metric).unit)
    return replace(
        c,
        status=Status.REGRESSED,
        bound=bound,
        bound_violated=True,
        reason=f"candidate {value} is beyond {bound.text}" + ("" if c.failed else f"; {c.reason}"),
    )


def _compare(
    metric: str,
    baseline: np.ndarray,
    candidate: np.ndarray,
    threshold: Threshold | None,
    missing: str,
) -> MetricComparison:
    m = metric_def(metric)
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    mb = float(np.median(b)) if len(b) else None
    mc = float(np.median(c)) if len(c) else None
    if mb is None or mc is None:
        which = "baseline" if mb is None else "candidate"
        why = missing or f"no value in the {which}"
        return MetricComparison(
            metric, Status.UNKNOWN, why, mb, mc, len(b), len(c), threshold=threshold
        )
    delta = mc - mb
    ratio = delta / abs(mb) if mb != 0 else None
    low = high = significant = None
    if min(len(b), len(c)) >= MIN_SAMPLES:
        low, high = median_difference_ci(b, c)
        significant = low > 0 or high < 0
    worse_if = threshold.worse_if if threshold else (1 if m.lower_is_better else -1)
    worse_by = worse_if * delta
    past = threshold is not None and worse_by > threshold.allowed(mb)
    noise = (
        "" if significant is not None else f" (fewer than {MIN_SAMPLES} values: no noise estimate)"
    )
    if delta == 0 or significant is False:
        status, why = (
            Status.UNCHANGED,
            "difference inside the step-to-step noise" if delta else "identical",
        )
    elif significant is None and threshold is not None and abs(delta) <= threshold.allowed(mb):
        # no noise estimate: the threshold stands in for it, in both directions
        status, why = Status.UNCHANGED, f"within ±{threshold.text[1:]}{noise}"
    elif significant is None and threshold is None and abs(delta) <= nominal_tolerance(m, mb):
        status, why = Status.UNCHANGED, f"within the nominal {m.nominal_text}{noise}"
    elif past:
        moved = "rose" if threshold.worse_if > 0 else "fell"
        status, why = Status.REGRESSED, f"{moved} by more than {threshold.text[1:]}{noise}"
        return MetricComparison(
            metric,
            status,
            why,
            mb,
            mc,
            len(b),
            len(c),
            delta,
            ratio,
            low,
            high,
            significant,
            threshold,
            past_threshold=True,
        )
    elif worse_by > 0:
        status = Status.WORSE
        why = (
            f"worse, within {threshold.text}{noise}"
            if threshold
            else f"worse (no threshold){noise}"
        )
    else:
        status, why = Status.IMPROVED, f"better{noise}"
    return MetricComparison(
        metric, status, why, mb, mc, len(b), len(c), delta, ratio, low, high, significant, threshold
    )


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
        return Verdict(
            False,
            tuple(c.metric for c in bad),
            good,
            "REGRESSION: " + "; ".join(_failure_text(c) for c in bad),
        )
    gated = [c for c in comparisons if c.threshold is not None or c.bound is not None]
    unknown = [metric_def(c.metric).short for c in gated if c.status is Status.UNKNOWN]
    worse = [
        f"{metric_def(c.metric).short} {_delta_text(c)}" for c in gated if c.status is Status.WORSE
    ]
    line = (
        f"PASS: no gated metric regressed past its threshold ({len(gated) - len(unknown)} checked"
    )
    line += f", {len(good)} improved" if good else ""
    line += f"; worse within the limits: {', '.join(worse)}" if worse else ""
    line += f"; unknown: {', '.join(unknown)})" if unknown else ")"
    return Verdict(True, (), good, line)


def _failure_text(c: MetricComparison) -> str:
    short = metric_def(c.metric).short
    parts = []
    if c.past_threshold:
        parts.append(f"{short} {_delta_text(c)} (limit {c.threshold.shown})")
    if c.bound_violated:
        parts.append(
            f"{short} {format_value(c.candidate_median, metric_def(c.metric).unit)} "
            f"(limit {c.bound.text})"
        )
    return "; ".join(parts)


def _delta_text(c: MetricComparison) -> str:
    if c.delta is None:
        return "?"
    if c.threshold is not None and c.threshold.relative and c.delta_ratio is not None:
        return number(c.delta_ratio, "relative")
    return format_delta(c.delta, metric_def(c.metric).unit)


def compare_runs(baseline, candidate, fail_on: FailOn) -> tuple[MetricComparison, ...]:
    """Every metric that either run has, or that a threshold gates, in `METRICS` order.

    `baseline` and `candidate` are `step_samples.RunSamples` (per-metric arrays and notes).
    """
    out = []
    for m in METRICS:
        b, c = baseline.get(m.name), candidate.get(m.name)
        threshold, bound = fail_on.get(m.name), fail_on.bound(m.name)
        if not len(b) and not len(c) and threshold is None and bound is None:
            continue
        missing = candidate.missing.get(m.name) or baseline.missing.get(m.name, "")
        if not len(b) and baseline.missing.get(m.name):
            missing = "baseline: " + baseline.missing[m.name]
        elif not len(c) and candidate.missing.get(m.name):
            missing = "candidate: " + candidate.missing[m.name]
        out.append(compare_metric(m.name, b, c, threshold, missing, bound))
    return tuple(out)
