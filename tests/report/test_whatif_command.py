"""`tpscope whatif`: the JSON fields scripts rely on, and exit 2 naming a bad CHANGE."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.test_cli import tpscope

RUN = Path(__file__).resolve().parents[2] / "sample_traces" / "h200x2-nvlink-none"


def test_json_fields_and_identity():
    done = tpscope("whatif", str(RUN), "comm=0.5", "hide=all", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["measured_step_us"] > 0
    assert abs(doc["replayed_step_us"] - doc["measured_step_us"]) <= 0.01 * doc["measured_step_us"]
    changes = [c["change"] for c in doc["changes"]]
    assert changes == ["comm=0.5", "hide=all", "comm=0.5 hide=all"]
    hide = doc["changes"][1]["predicted_step_us"]
    half = doc["changes"][0]["predicted_step_us"]
    assert hide < half < doc["measured_step_us"]


def test_bad_change_exits_2_naming_it():
    done = tpscope("whatif", str(RUN), "fuse=magic")
    assert done.returncode == 2
    assert "fuse=magic" in done.stderr and "Traceback" not in done.stderr
    done = tpscope("whatif", str(RUN), "comm=0.5@no_such_group")
    assert done.returncode == 2 and "no_such_group" in done.stderr


def test_report_says_the_headroom_of_hiding_communication(tmp_path):
    """The two-rank trace of tests/metrics/test_replay.py: a 400 µs step, 250 µs without the
    all-gather's transfer (by hand): at most 1.60x."""
    from tests.kineto import write_run
    from tests.metrics.test_replay import _two_ranks

    run = write_run(tmp_path / "run", _two_ranks())
    done = tpscope("report", str(run))
    assert done.returncode == 0, done.stderr
    assert "What-if: hiding all communication: at most 1.60x" in done.stdout
    # the same bound is the last of the findings, in the report and in analyze's terminal output
    assert "**Headroom: hiding all communication: at most 1.60x.**" in done.stdout
    done = tpscope("analyze", str(run))
    assert done.returncode == 0, done.stderr
    found = done.stdout.split("What matters in this run")[1].split("\n\n")[0]
    numbered = re.findall(r"^\d+\. (.*)$", found, flags=re.M)
    assert numbered[-1].startswith("Headroom: hiding all communication: at most 1.60x")


def test_contention_from_a_fused_run_and_from_an_unfused_one():
    """A fused shm run gives fuse= its measured slowdown (SM transfers); an unfused run has no
    GEMM beside a transfer: one line naming the option, exit 2."""
    shm = RUN.parent / "h200x2-shm-none"
    done = tpscope(
        "whatif",
        str(shm),
        "fuse=chunked:4",
        "--json",
        "--contention-from",
        str(RUN.parent / "h200x2-shm-auto"),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["contention"]["transfers"] == "sm" and doc["contention"]["slowdown"] > 0
    assert any("measured on" in n for n in doc["changes"][0]["notes"])
    done = tpscope("whatif", str(shm), "fuse=chunked:4", "--contention-from", str(RUN))
    assert done.returncode == 2 and "--contention-from" in done.stderr


def test_the_table_writes_each_step_in_us_like_every_other_table():
    """The measured row's per-step column holds each step's time of the slowest rank (the trace's
    ProfilerStep spans, from the analyzer's JSON) in µs, as `analyze` writes them."""
    done = tpscope("whatif", str(RUN), "hide=all")
    assert done.returncode == 0, done.stderr
    assert "per step (µs)" in done.stdout and "(ms)" not in done.stdout
    doc = json.loads(tpscope("analyze", str(RUN), "--json").stdout)
    slowest: dict[int, float] = {}
    for s in doc["steps"]:
        slowest[s["step"]] = max(slowest.get(s["step"], 0.0), s["step_time_us"])
    cells = " / ".join(f"{slowest[k]:,.0f}" for k in sorted(slowest))
    measured = next(line for line in done.stdout.splitlines() if line.startswith("(measured)"))
    assert cells in measured, (cells, measured)
