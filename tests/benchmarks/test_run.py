"""benchmarks/run.py: a CPU recipe end to end, a failing and a hung step, the one-line errors."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import run  # noqa: E402
from recipes import BY_NAME, MULTICAST_OFF, Recipe, tp  # noqa: E402


@pytest.mark.slow
def test_cpu_recipe_writes_a_result_folder(tmp_path):
    out = tmp_path / "res"
    assert run.main(["cpu-smoke", "--out", str(out)]) == 0
    rec = json.loads((out / "result.json").read_text())
    assert rec["recipe"] == "cpu-smoke" and [s["exit"] for s in rec["steps"]] == [0, 0]
    assert rec["steps"][0]["command"].startswith("python -m tpscope.cli bench --device cpu")
    assert rec["versions"]["torch"] and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", rec["date"])
    bench = json.loads((out / "bench-cpu" / "bench.json").read_text())
    assert {r["side"] for r in bench["results"]} == {"ag", "rs"}
    sweep = json.loads((out / "sweep-cpu" / "sweep.json").read_text())
    readme = (out / "README.md").read_text()
    assert "## Commands" in readme and rec["steps"][1]["command"] in readme
    base = sweep["runs"][0]["tokens_per_s"]
    for r in sweep["runs"]:  # the README's sweep rows, recomputed from the runs' manifests
        tps = json.loads((out / "sweep-cpu" / r["run"] / "tpscope_run.jsonc").read_text())[
            "tokens_per_s"
        ]
        assert f"| {r['run']} | {r['mode']} | {tps:,.0f} | {tps / base:.3f}× |" in readme
    log = (out / "log.txt").read_text()
    assert log.count("== exit 0 after") == 2

    # --readme --analyze: the analyzer's figures added to a sweep recorded without them
    for r in sweep["runs"]:
        r["analyze"] = None
    (out / "sweep-cpu" / "sweep.json").write_text(json.dumps(sweep))
    assert run.main(["--readme", str(out), "--analyze"]) == 0
    rows = json.loads((out / "sweep-cpu" / "sweep.json").read_text())["runs"]
    assert all(0 <= r["analyze"]["exposed_comm_ratio"] <= 1 for r in rows)
    assert "| exposed comm ratio |" in (out / "README.md").read_text()


def test_a_failed_and_a_hung_step_are_recorded(tmp_path):
    bad = Recipe(
        "t",
        "cpu",
        "gloo",
        "-",
        "a test",
        (
            tp("bench", "--device", "cpu", "--shape", "1,2", limit_s=60),  # not a shape: exit 2
            tp("bench", "--device", "cpu", "--shape", "small", "--reps", "500", limit_s=1),
        ),
    )
    rec = run.run_recipe(bad, tmp_path, log=open("/dev/null", "w"))
    assert [s["exit"] for s in rec["steps"]] == [2, 124]
    assert "**Failed steps:**" in (tmp_path / "README.md").read_text()
    assert "(limit 1 s)" in (tmp_path / "log.txt").read_text()


def test_steps_get_multicast_off_and_the_source_tree(tmp_path):
    step = BY_NAME["calibrate"].steps[0]
    env = run.step_env(step, tmp_path, {"PYTHONPATH": "/x", "NCCL_NVLS_ENABLE": "1"})
    assert {k: env[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    assert env["PYTHONPATH"].split(":") == [str(run.ROOT), "/x"]
    assert env["TPSCOPE_CACHE_DIR"] == f"{tmp_path}/cache"
    assert run.command(step, tmp_path)[1:4] == ["-m", "tpscope.cli", "calibrate"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["no-such"], "RECIPE 'no-such': not a recipe"),
        ([], "give a RECIPE"),
        (["--readme", "/nonexistent"], "no result.json there"),
    ],
)
def test_user_errors_are_one_line_exit_2(argv, words, capsys):
    assert run.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_a_non_empty_out_is_refused(tmp_path, capsys):
    (tmp_path / "x").write_text("")
    assert run.main(["cpu-smoke", "--out", str(tmp_path)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
