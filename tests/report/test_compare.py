"""The noise-aware comparison: thresholds, statuses, and the bootstrap's false-alarm rate and power."""

from __future__ import annotations

import numpy as np
import pytest

from tpscope.errors import UserError
from tpscope.report.compare import (
    Status,
    compare_metric,
    median_difference_ci,
    parse_fail_on,
    verdict,
)


def test_default_thresholds_gate_time_exposure_throughput_and_memory():
    fo = parse_fail_on(None)
    got = {(t.metric, round(t.limit, 6), t.relative, t.worse_if) for t in fo.thresholds}
    assert got == {
        ("step_time_us", 0.03, True, 1),
        ("exposed_comm_ratio", 0.02, False, 1),
        ("tokens_per_s", 0.03, True, -1),
        ("peak_memory_bytes", 0.05, True, 1),
    }


def test_spec_overrides_one_metric_and_keeps_the_other_defaults():
    fo = parse_fail_on("step_time=+5%, peak_memory=off, idle=+10")
    assert fo.get("step_time_us").limit == pytest.approx(0.05)
    assert fo.get("peak_memory_bytes") is None
    assert fo.get("tokens_per_s").worse_if == -1
    idle = fo.get("idle_us")
    assert (idle.limit, idle.relative, idle.worse_if) == (10.0, False, 1)


def test_unsigned_limit_takes_the_metrics_bad_direction():
    fo = parse_fail_on("tokens_per_s=2%,exposed_comm_ratio=0.01")
    assert fo.get("tokens_per_s").worse_if == -1  # higher is better: a fall is bad
    assert fo.get("exposed_comm_ratio").worse_if == 1


@pytest.mark.parametrize(
    "spec", ["step_time", "stepp_time=+3%", "step_time=+abc", "step_time=-inf%", "=3%"]
)
def test_bad_spec_is_a_one_line_user_error(spec):
    with pytest.raises(UserError) as err:
        parse_fail_on(spec)
    assert "\n" not in str(err.value) and "--fail-on" in str(err.value)


def _step_time(base, cand, spec=None):
    return compare_metric(
        "step_time_us",
        np.asarray(base, float),
        np.asarray(cand, float),
        parse_fail_on(spec).get("step_time_us"),
    )


def test_identical_samples_are_unchanged():
    c = _step_time([100, 101, 99], [100, 101, 99])
    assert c.status is Status.UNCHANGED and not c.failed and c.delta == 0


def test_a_big_median_change_inside_the_noise_never_fails():
    # medians 100 -> 110 (+10%, past +3%), but the samples interleave: noise, not a change
    base = [80, 90, 100, 120, 130]
    cand = [85, 95, 110, 125, 135]
    c = _step_time(base, cand)
    assert c.delta == pytest.approx(10.0)
    assert c.status is Status.UNCHANGED and not c.failed
    assert c.ci_low < 0 < c.ci_high


def test_a_clear_ten_percent_slowdown_regresses():
    base = np.array([100.0, 100.5, 99.5, 100.2, 99.8])
    c = _step_time(base, base * 1.10)
    assert c.status is Status.REGRESSED and c.failed
    assert c.delta_ratio == pytest.approx(0.10, abs=1e-9)  # medians 100 -> 110
    assert c.ci_low > 0


def test_a_real_change_within_the_threshold_is_worse_but_passes():
    base = np.array([100.0, 100.1, 99.9, 100.05, 99.95])
    c = _step_time(base, base + 1.0)  # +1%: outside this tiny noise, within +3%
    assert c.status is Status.WORSE and not c.failed


def test_faster_is_improved():
    base = np.array([100.0, 100.5, 99.5])
    assert _step_time(base, base * 0.8).status is Status.IMPROVED


def test_single_values_are_judged_by_the_threshold_alone():
    t = parse_fail_on(None).get("peak_memory_bytes")
    over = compare_metric("peak_memory_bytes", np.array([100e9]), np.array([106e9]), t)
    under = compare_metric("peak_memory_bytes", np.array([100e9]), np.array([104e9]), t)
    assert over.status is Status.REGRESSED and over.significant is None
    # the threshold stands in for noise
    assert under.status is Status.UNCHANGED and not under.failed
    less = compare_metric("peak_memory_bytes", np.array([100e9]), np.array([90e9]), t)
    assert less.status is Status.IMPROVED  # 10% less: past the 5% either way


def test_two_steps_without_a_threshold_keep_their_direction_but_say_there_is_no_noise_estimate():
    c = compare_metric("idle_us", np.array([10.0, 11.0]), np.array([20.0, 21.0]), None)
    assert c.status is Status.WORSE and c.significant is None and "no noise estimate" in c.reason


def test_a_throughput_drop_fails_and_a_rise_passes():
    t = parse_fail_on(None).get("tokens_per_s")
    drop = compare_metric("tokens_per_s", np.full(5, 1000.0), np.full(5, 900.0), t)
    rise = compare_metric("tokens_per_s", np.full(5, 1000.0), np.full(5, 1100.0), t)
    assert drop.status is Status.REGRESSED
    assert rise.status is Status.IMPROVED


def test_missing_values_are_unknown_not_zero_and_do_not_fail():
    c = compare_metric(
        "tokens_per_s",
        np.zeros(0),
        np.array([5.0]),
        parse_fail_on(None).get("tokens_per_s"),
        missing="no manifest",
    )
    assert c.status is Status.UNKNOWN and c.baseline_median is None and c.reason == "no manifest"
    assert verdict([c]).passed


def test_verdict_names_the_regressed_metric():
    base = np.array([100.0, 100.5, 99.5, 100.2])
    v = verdict([_step_time(base, base * 1.10), _step_time(base, base)])
    assert not v.passed and v.regressed == ("step_time_us",)
    assert "step_time" in v.line and "+10.0%" in v.line


def test_constant_samples_give_a_point_interval():
    low, high = median_difference_ci(np.full(4, 2.0), np.full(6, 5.0))
    assert low == high == 3.0


@pytest.mark.parametrize("n, rate", [(5, 0.08), (20, 0.10)])
def test_false_alarm_rate_on_pure_noise_is_near_the_nominal_five_percent(n, rate):
    rng = np.random.default_rng(n)
    alarms = 0
    trials = 300
    for _ in range(trials):
        a, b = rng.normal(100, 5, n), rng.normal(100, 5, n)
        low, high = median_difference_ci(a, b, n_boot=1000)
        alarms += low > 0 or high < 0
    assert alarms / trials < rate


def test_power_on_a_one_sigma_shift_with_twenty_steps():
    rng = np.random.default_rng(2)
    hits = 0
    trials = 100
    for _ in range(trials):
        a, b = rng.normal(100, 5, 20), rng.normal(105, 5, 20)
        low, _ = median_difference_ci(a, b, n_boot=1000)
        hits += low > 0
    assert hits / trials > 0.7


def test_a_pass_line_mentions_what_got_worse_within_the_limits():
    base = np.array([100.0, 100.5, 99.5, 100.2])
    v = verdict([_step_time(base, base * 1.10, "step_time=+12%")])
    assert v.passed and "worse within the limits: step_time +10.0%" in v.line


def test_without_noise_estimate_or_threshold_a_tiny_change_is_unchanged():
    ratio = compare_metric("overlap_ratio", np.array([0.30, 0.30]), np.array([0.304, 0.304]), None)
    time = compare_metric("idle_us", np.array([100.0, 100.0]), np.array([100.9, 100.9]), None)
    assert ratio.status is Status.UNCHANGED and time.status is Status.UNCHANGED
    assert (
        compare_metric("idle_us", np.array([100.0, 100.0]), np.array([101.5, 101.5]), None).status
        is Status.WORSE
    )


def test_bounds_parse_with_units_and_coexist_with_thresholds():
    fo = parse_fail_on("peak_memory<=75GiB,tokens_per_s>=50000,exposed_comm_ratio<=30%")
    mem = fo.bound("peak_memory_bytes")
    assert (mem.value, mem.upper) == (75 * 2**30, True)
    assert fo.get("peak_memory_bytes").limit == pytest.approx(0.05)  # the default threshold stays
    assert fo.bound("tokens_per_s").upper is False and fo.bound("tokens_per_s").value == 50000
    assert fo.bound("exposed_comm_ratio").value == pytest.approx(0.30)
    assert "peak_memory<=75GiB" in fo.spec
    assert parse_fail_on("peak_memory<=1TB").bound("peak_memory_bytes").value == 10**12
    assert parse_fail_on("peak_memory<=75GiB,peak_memory=off").bound("peak_memory_bytes") is None


@pytest.mark.parametrize("spec", ["peak_memory<=lots", "peak_memory<=", "tokens_per_s>=nan"])
def test_bad_bound_is_a_user_error(spec):
    with pytest.raises(UserError):
        parse_fail_on(spec)


def test_a_candidate_beyond_a_ceiling_fails_even_when_the_change_is_small():
    fo = parse_fail_on("peak_memory<=75GiB")
    base, cand = np.array([74.0 * 2**30]), np.array([76.0 * 2**30])  # +2.7%: within +5%
    c = compare_metric(
        "peak_memory_bytes",
        base,
        cand,
        fo.get("peak_memory_bytes"),
        bound=fo.bound("peak_memory_bytes"),
    )
    assert c.failed and c.bound_violated and not c.past_threshold
    v = verdict([c])
    assert not v.passed and "peak_memory 76.00 GiB (limit <=75GiB)" in v.line
    # without a baseline value the bound still judges the candidate
    alone = compare_metric(
        "peak_memory_bytes", np.zeros(0), cand, None, bound=fo.bound("peak_memory_bytes")
    )
    assert alone.failed
    ok = compare_metric(
        "peak_memory_bytes",
        base,
        np.array([70.0 * 2**30]),
        None,
        bound=fo.bound("peak_memory_bytes"),
    )
    assert not ok.failed and ok.bound is not None


def test_a_limit_shows_in_the_metric_s_unit_and_the_spec_stays_as_written():
    from tpscope.report.compare import Threshold

    t = Threshold("exposed_comm_ratio", 0.02, False, +1)
    assert t.shown == "+2 pp" and t.text == "+0.02"  # next to "+34.3 pp", not "+0.02"
    assert Threshold("step_time_us", 0.03, True, +1).shown == "+3%"
    assert Threshold("step_time_us", 500.0, False, +1).shown == "+500 µs"
