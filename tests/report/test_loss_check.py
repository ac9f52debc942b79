"""The loss gate: a candidate whose per-step losses depart from the baseline's (same seed, model,
data and recipe) fails; runs that trained something else are not compared; a run whose loss did
not fall is flagged. Hand-made loss curves on a real run folder's traces."""

from __future__ import annotations

import json

from junitparser import Failure, JUnitXml

from tests.report._runs import UNFUSED, copy_run, manifest
from tpscope.cli import main
from tpscope.report.loss_check import loss_check
from tpscope.runfolder.manifest import Manifest, manifest_from_dict

LEARNING = [10.4, 9.0, 7.5, 6.0, 5.0, 4.2, 3.6, 3.1, 2.8, 2.6]
SAME = {
    "seed": 0,
    "model": {"layers": 2, "hidden": 8192},
    "device": "cuda",
    "dtype": "float32",
    "seq_len": 8192,
    "batch": 1,
    "steps": 10,
    "lr": 3e-4,
    "warmup_steps": 1,
    "decay_to": 0.1,
    "grad_clip": 1.0,
    "weight_decay": 0.1,
    "tp": 2,
    "optimizer": "AdamW",
    "data": "affine4",
}


def _raw(losses: list[float], **over) -> dict:
    return {**manifest([10.0] * 4, 2**30), **SAME, "losses": losses, **over}


def _m(losses: list[float], **over) -> Manifest:
    return manifest_from_dict(_raw(losses, **over), "m.json")


def test_within_the_dtype_tolerance_agrees_beyond_it_fails():
    near = [x * (1 + 5e-6) for x in LEARNING]  # inside float32's 1e-5
    assert not loss_check(_m(LEARNING), _m(near)).failed
    off = LEARNING[:6] + [LEARNING[6] * 1.001] + LEARNING[7:]  # one step 1e-3 away
    check = loss_check(_m(LEARNING), _m(off))
    assert check.failed and check.agreement.worst_step == 7
    assert not loss_check(
        _m(LEARNING, dtype="bfloat16"), _m(off, dtype="bfloat16")
    ).failed  # bf16: 2e-2
    assert loss_check(_m(LEARNING), _m(off), rtol=1e-2).agreement.agree  # --loss-rtol 1e-2
    assert loss_check(_m(LEARNING), _m(off), rtol=-1).agreement is None  # --loss-rtol off


def test_runs_of_another_model_or_seed_are_not_compared():
    for key, value in (
        ("seed", 1),
        ("lr", 1e-3),
        ("data", "other"),
        ("model", {"layers": 1}),
        ("device", "cpu"),
    ):
        check = loss_check(_m(LEARNING), _m(LEARNING[::-1], **{key: value}))
        assert check.agreement is None and not check.failed and key in check.not_compared
    # a manifest without the field
    old = manifest_from_dict(
        {k: v for k, v in _raw(LEARNING).items() if k != "warmup_steps"}, "m.json"
    )
    assert "warmup_steps" in loss_check(old, _m(LEARNING)).not_compared


def test_a_rising_loss_is_flagged_alone_and_against_a_baseline():
    rising = [10.5, 12.0, 15.0, 19.8, 16.1, 17.0, 18.0, 19.0, 20.0, 21.0]
    alone = loss_check(None, _m(rising))
    assert alone.diverged and not alone.failed and alone.candidate_trend.last_mean == 21.0
    assert not loss_check(None, _m(LEARNING)).diverged
    assert loss_check(None, Manifest(mode="none")) is None  # no losses recorded: nothing to say


def test_report_fails_a_departing_candidate_and_says_why(capsys, tmp_path):
    base = copy_run(UNFUSED, tmp_path / "base", _raw(LEARNING))
    same = copy_run(
        UNFUSED, tmp_path / "same", _raw([x * (1 + 2e-6) for x in LEARNING], mode="chunked")
    )
    apart = copy_run(
        UNFUSED,
        tmp_path / "apart",
        _raw(LEARNING[:3] + [x + 0.5 for x in LEARNING[3:]], mode="ring"),
    )
    assert main(["report", str(same), "--baseline", str(base)]) == 0
    out = capsys.readouterr().out
    assert "loss curves agree over 10 steps" in out and "tolerance 1e-05" in out
    assert main(["report", str(apart), "--baseline", str(base), "--out", str(tmp_path / "r")]) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert (
        line.startswith("REGRESSION: loss departs from the baseline's from step 4 of 10")
        and "step 10" in line
    )
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["exit_code"] == 1 and doc["loss"]["agreement"]["first_step"] == 4
    assert doc["loss"]["agreement"]["worst_step"] == 10  # 0.5 of 2.6, the largest share
    case = next(
        c
        for suite in JUnitXml.fromfile(str(tmp_path / "r" / "report.junit.xml"))
        for c in suite
        if c.name == "loss curve within tolerance"
    )
    assert any(isinstance(r, Failure) for r in case.result)
    assert main(["report", str(apart), "--baseline", str(base), "--loss-rtol", "off"]) == 0
    capsys.readouterr()


def test_a_bad_loss_tolerance_exits_2_with_one_line(capsys, tmp_path):
    base = copy_run(UNFUSED, tmp_path / "base", _raw(LEARNING))
    for bad in ("-1", "abc", "inf"):
        assert main(["report", str(base), "--baseline", str(base), "--loss-rtol", bad]) == 2
        err = capsys.readouterr().err
        assert "--loss-rtol" in err and err.strip().count("\n") == 0


def test_a_candidate_with_fewer_losses_than_the_baseline_fails():
    """3 of 10 losses agree with the baseline's first 3; the 7 missing steps are no agreement."""
    check = loss_check(_m(LEARNING), _m(LEARNING[:3]))
    assert check.failed and check.agreement.steps == 3
    assert "3 of the baseline's 10 steps" in check.line


def test_report_refuses_a_verdict_on_a_run_that_did_not_finish(capsys, tmp_path):
    base = copy_run(UNFUSED, tmp_path / "base", _raw(LEARNING))
    cut = copy_run(
        UNFUSED,
        tmp_path / "cut",
        _raw(LEARNING[:3], complete=False, stopped="stopped by SIGTERM", mode="chunked"),
    )
    assert main(["report", str(cut), "--baseline", str(base)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cut) in err[0] and "did not finish (stopped by SIGTERM)" in err[0]
    assert main(["report", str(base), "--baseline", str(cut)]) == 2
    assert str(cut) in capsys.readouterr().err
    assert main(["report", str(cut)]) == 0  # a report of the run alone: warned, no verdict
    assert "did not finish" in capsys.readouterr().out
