"""The numerics gate: does the candidate train the baseline's model? (docs/ci.md, "Loss curves").

A fusion changes the order of sums, not what is computed, so with the same seed, model, data and
recipe a candidate's per-step losses equal the baseline's to rounding (tpscope.runfolder.losses
holds the rule and its tolerance by dtype). Beyond the tolerance the candidate fails: a fusion
that changes the numerics is a regression. Runs whose manifests differ in what they train are not
compared (the reason is said). A run whose loss did not fall is flagged, whatever the baseline.
Pure: manifests in, a frozen value out.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpscope.report.compare import Verdict
from tpscope.runfolder.losses import (
    LOSS_RTOL,
    SAME_RUN_KEYS,
    LossAgreement,
    LossTrend,
    loss_agreement,
    loss_trend,
)
from tpscope.runfolder.manifest import Manifest
from tpscope.text import printable


@dataclass(frozen=True, slots=True)
class LossCheck:
    """The candidate's loss trend, the baseline's, and their step-by-step agreement."""

    candidate_trend: LossTrend | None
    baseline_trend: LossTrend | None = None
    agreement: LossAgreement | None = None  # None: not compared (`not_compared` says why)
    not_compared: str = ""

    @property
    def failed(self) -> bool:
        return self.agreement is not None and not self.agreement.agree

    @property
    def diverged(self) -> bool:
        """The candidate's loss did not fall (last tenth's mean not below the first tenth's)."""
        return self.candidate_trend is not None and not self.candidate_trend.fell

    def trend_text(self, trend: LossTrend | None) -> str:
        if trend is None:
            return "no losses recorded"
        verb = "fell" if trend.fell else "did not fall"
        return (
            f"loss {verb}: {trend.first_mean:.4g} -> {trend.last_mean:.4g} "
            f"(mean of the first and last {trend.window_steps} steps)"
        )

    @property
    def line(self) -> str:
        """One line on the loss curves."""
        a = self.agreement
        if a is None:
            return f"loss curves not compared: {self.not_compared}" if self.not_compared else ""
        worst = f"largest difference {a.worst_rel:.2g} of the loss at step {a.worst_step}"
        if a.agree:
            return f"loss curves agree over {a.steps} steps ({worst}, tolerance {a.rtol:g})"
        if a.first_step == 0 and a.candidate_steps != a.baseline_steps:
            return (
                f"the candidate recorded the loss of {a.candidate_steps} of the baseline's "
                f"{a.baseline_steps} steps (the first {a.steps} agree: {worst}, tolerance "
                f"{a.rtol:g})"
            )
        return (
            f"loss departs from the baseline's from step {a.first_step} of {a.steps}: {worst} "
            f"(tolerance {a.rtol:g})"
        )


def _losses(manifest: Manifest | None) -> list[float] | None:
    losses = manifest.losses if manifest is not None else None
    return [float(x) for x in losses] if losses else None


def _why_not_comparable(baseline: Manifest, candidate: Manifest) -> str:
    for key in SAME_RUN_KEYS:
        b, c = getattr(baseline, key), getattr(candidate, key)
        if b is None or c is None:
            return (
                f"the {'baseline' if b is None else 'candidate'}'s manifest does not record {key}"
            )
        if b != c:
            return printable(f"{key} differs ({b} -> {c})")
    return ""


def loss_check(
    baseline: Manifest | None, candidate: Manifest | None, rtol: float | None = None
) -> LossCheck | None:
    """The check of `candidate`'s manifest (against `baseline`'s when given). `rtol`: the
    tolerance (None: LOSS_RTOL of the runs' dtype; a negative value turns the comparison off).
    None when the candidate has no losses."""
    c_losses = _losses(candidate)
    if c_losses is None:
        return None
    c_trend = loss_trend(c_losses)
    if baseline is None:
        return LossCheck(c_trend)
    b_losses = _losses(baseline)
    if b_losses is None:
        return LossCheck(c_trend, None, None, "the baseline records no losses")
    b_trend = loss_trend(b_losses)
    if rtol is not None and rtol < 0:
        return LossCheck(c_trend, b_trend, None, "turned off (--loss-rtol off)")
    why = _why_not_comparable(baseline, candidate)
    if why:
        return LossCheck(c_trend, b_trend, None, why)
    tol = rtol if rtol is not None else LOSS_RTOL.get(str(candidate.dtype))
    if tol is None:
        return LossCheck(
            c_trend, b_trend, None, printable(f"no tolerance for dtype {candidate.dtype}")
        )
    return LossCheck(c_trend, b_trend, loss_agreement(b_losses, c_losses, tol))


def with_loss(verdict: Verdict | None, check: LossCheck | None) -> Verdict | None:
    """The verdict with the loss gate: a departing loss curve fails it, named first."""
    if verdict is None or check is None or not check.failed:
        return verdict
    rest = verdict.line.removeprefix("REGRESSION: ") if not verdict.passed else ""
    line = "REGRESSION: " + check.line + (f"; {rest}" if rest else "")
    return Verdict(False, ("loss", *verdict.regressed), verdict.improved, line)
