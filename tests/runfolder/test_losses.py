"""The loss trend and the step-by-step agreement of two runs' losses, on hand-made curves."""

from __future__ import annotations

import math

from tpscope.runfolder.losses import loss_agreement, loss_trend


def test_trend_means_the_first_and_last_tenth():
    t = loss_trend([4.0] * 5 + [3.0] * 40 + [1.0] * 5)  # 50 steps: windows of 5
    assert (t.window_steps, t.first_mean, t.last_mean, t.fell) == (5, 4.0, 1.0, True)
    rising = loss_trend([1.0, 2.0, 3.0])  # fewer than 10 steps: one step each
    assert (rising.window_steps, rising.first_mean, rising.last_mean, rising.fell) == (
        1,
        1.0,
        3.0,
        False,
    )
    assert loss_trend([5.0, math.nan]).fell is False
    assert loss_trend([]) is None


def test_agreement_is_per_step_and_relative():
    base = [4.0, 3.0, 2.0, 1.0]
    ok = loss_agreement(base, [4.0, 3.0 * (1 + 9e-6), 2.0, 1.0], rtol=1e-5)
    assert ok.agree and ok.worst_step == 2 and math.isclose(ok.worst_rel, 9e-6, rel_tol=1e-6)
    bad = loss_agreement(base, [4.0, 3.0, 2.0, 1.0 + 2e-5], rtol=1e-5)
    assert not bad.agree and bad.worst_step == 4 and math.isclose(bad.worst_rel, 2e-5, rel_tol=1e-6)
    late = loss_agreement(base, [4.0, 3.0 + 1e-3, 2.0, 1.0 + 1e-2], rtol=1e-5)
    assert (late.first_step, late.worst_step) == (2, 4) and ok.first_step == 0
    assert loss_agreement(base, base[:2], rtol=0.0).steps == 2  # the steps both runs have
    assert not loss_agreement(base, [4.0, math.nan, 2.0, 1.0], rtol=1.0).agree
    assert not loss_agreement([], [], rtol=1.0).agree  # nothing compared is not agreement
