"""`tpscope whatif`: the JSON fields scripts rely on, and exit 2 naming a bad CHANGE."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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


def test_bad_options_exit_2_naming_them(tmp_path):
    """A --contention-from that does not exist names the option; --workers 0 is refused as
    analyze refuses it; each one line, exit 2."""
    done = tpscope("whatif", str(RUN), "comm=0.5", "--contention-from", str(tmp_path / "nope"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--contention-from {tmp_path / 'nope'}: no such file or folder" in done.stderr
    done = tpscope("whatif", str(RUN), "comm=0.5", "--workers", "0")
    assert done.returncode == 2 and "--workers must be >= 1" in done.stderr


def test_json_has_the_measured_exposed_communication():
    """The measured row's exposed communication is in the JSON beside each prediction's."""
    done = tpscope("whatif", str(RUN), "hide=all", "--json")
    doc = json.loads(done.stdout)
    assert doc["measured_exposed_comm_us"] > doc["changes"][0]["exposed_comm_us"] > 0


def test_fuse_on_a_fused_run_says_it_is_fused_already():
    done = tpscope("whatif", str(RUN.parent / "h200x2-shm-chunked"), "fuse=chunked:4")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "fuse=chunked:4" in done.stderr and "fused already" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_readme_s_what_if_example_states_what_it_prints():
    """README's what-if paragraph: its command runs and gives the speedups and step times it
    states (rounded as README rounds them)."""
    text = (RUN.parents[1] / "README.md").read_text()
    command = next(ln for ln in text.splitlines() if ln.startswith("tpscope whatif "))
    done = tpscope(*command.split()[1:], "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    hide, fuse = doc["changes"][0], doc["changes"][1]
    prose = " ".join(text.split(command)[1].split("Run the tests")[0].split())
    assert f"at most {hide['speedup']:.2f}x ({hide['predicted_step_us'] / 1000:.1f} ms" in prose
    assert f"against {doc['measured_step_us'] / 1000:.1f} ms measured" in prose
    assert f"{fuse['speedup']:.2f}x ({fuse['predicted_step_us'] / 1000:.1f} ms" in prose
    chunked = tpscope("whatif", str(RUN.parent / "h200x2-shm-chunked"), "--json")
    measured = json.loads(chunked.stdout)["measured_step_us"]
    assert f"the chunked run measured {measured / 1000:.1f} ms" in prose


def test_report_s_tp_headroom_is_one_change_the_user_can_run(tmp_path):
    """The layer of tests/metrics/test_whatif_fuse.py (an AG-GEMM and a GEMM-RS pair found, and a
    decoy all-gather): an 850 µs step; hiding every all-gather and reduce-scatter leaves the three
    GEMMs, 600 µs (by hand): at most 1.42x, by the one change the line names."""
    from tests.kineto import write_run
    from tests.metrics.test_whatif_fuse import _layer

    run = write_run(tmp_path / "run", _layer())
    done = tpscope("report", str(run))
    assert done.returncode == 0, done.stderr
    line = "What-if: hiding all TP communication: at most 1.42x (tpscope whatif "
    assert line + "hide=all_gather,reduce_scatter;" in done.stdout
    done = tpscope("whatif", str(run), "hide=all_gather,reduce_scatter", "--json")
    assert json.loads(done.stdout)["changes"][0]["predicted_step_us"] == pytest.approx(600, abs=1)


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
