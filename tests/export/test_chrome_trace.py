"""The exported step (tpscope/export/chrome_trace.py) on the real H200 runs: the Trace Event
Format's rules, the activities the trace tables hold, the analyzer's numbers on the added tracks,
and read back by tpscope and by HTA.

Expected counts come from the trace tables and the analyzer JSON, computed here.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tpscope.cli import main
from tpscope.export.chrome_trace import TRACKS, step_trace
from tpscope.metrics import analyze_run, as_json
from tpscope.metrics.per_activity import activity_detail
from tpscope.trace import load_run

DATA = Path(__file__).resolve().parent.parent / "data"
RUNS = [DATA / "h200-shm-chunked4", DATA / "h200-nvlink-unfused"]
PHASES = {"X", "M", "s", "f"}
META = {"process_name", "process_sort_index", "process_labels", "thread_name", "thread_sort_index"}


@pytest.fixture(scope="module", params=RUNS, ids=lambda p: p.name)
def exported(request, tmp_path_factory):
    run = load_run(request.param)
    analysis = analyze_run(run)
    doc = as_json(analysis)
    step = sorted({s["step"] for s in doc["steps"]})[1]
    trace = step_trace(
        run, activity_detail(run), step, None, doc["clock_offsets_us"], analysis.kernel_contention
    )
    path = tmp_path_factory.mktemp("export") / f"{request.param.name}-step-{step}.json"
    path.write_text(json.dumps(trace, allow_nan=False))
    return {
        "run": run,
        "doc": doc,
        "analysis": analysis,
        "step": step,
        "trace": json.loads(path.read_text()),
        "path": path,
    }


def _events(trace, ph=None, cat=None, tid_name=None):
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    return [
        e
        for e in trace["traceEvents"]
        if (ph is None or e["ph"] == ph)
        and (cat is None or e.get("cat") == cat)
        and (tid_name is None or names.get((e["pid"], e.get("tid"))) == tid_name)
    ]


def test_every_event_follows_the_trace_event_format(exported):
    events = exported["trace"]["traceEvents"]
    assert events and {e["ph"] for e in events} <= PHASES
    for e in events:
        assert isinstance(e["pid"], int) and isinstance(e["name"], str) and e["name"], e
        if e["ph"] == "M":
            assert e["name"] in META and isinstance(e["args"], dict), e
            continue
        assert (
            isinstance(e["tid"], int)
            and isinstance(e["ts"], (int, float))
            and math.isfinite(e["ts"])
        ), e
        if e["ph"] == "X":
            assert (
                isinstance(e["dur"], (int, float)) and e["dur"] >= 0 and isinstance(e["cat"], str)
            ), e
    named_threads = {
        (e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"
    }
    named_procs = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    for e in events:
        if e["ph"] != "M":
            # every track named
            assert (e["pid"], e["tid"]) in named_threads and e["pid"] in named_procs, e
    # flows: one start and one end per id, the end bound to the enclosing slice, never before its start
    starts = {(e["cat"], e["id"]): e for e in events if e["ph"] == "s"}
    ends = {(e["cat"], e["id"]): e for e in events if e["ph"] == "f"}
    assert len(starts) == sum(e["ph"] == "s" for e in events) and starts.keys() == ends.keys()
    for k, s in starts.items():
        assert ends[k]["bp"] == "e" and ends[k]["ts"] >= s["ts"] - 1e-3
        target = [
            x
            for x in _events(exported["trace"], "X")
            if x["pid"] == ends[k]["pid"]
            and x["tid"] == ends[k]["tid"]
            and x["ts"] <= ends[k]["ts"] <= x["ts"] + x["dur"]
        ]
        assert target, ends[k]  # the arrow lands on a GPU activity


def test_the_gpu_activities_are_the_trace_tables(exported):
    run, step, trace = exported["run"], exported["step"], exported["trace"]
    for r in run.ranks:
        m = r.steps.step == step
        lo, hi = r.steps.start_ns[m].min(), r.steps.end_ns[m].max()
        want = int(((r.gpu.start_ns < hi) & (r.gpu.end_ns > lo)).sum())
        got = [
            e
            for e in trace["traceEvents"]
            if e["ph"] == "X"
            and e["pid"] == r.rank
            and e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")
        ]
        assert len(got) == want
        assert sum(e["dur"] for e in got) == pytest.approx(
            (r.gpu.dur_ns[(r.gpu.start_ns < hi) & (r.gpu.end_ns > lo)]).sum() / 1000.0,
            abs=1e-3 * want,
        )
        threads = [
            e["args"]["name"]
            for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == r.rank
        ]
        assert all(t.startswith("stream ") for t in threads[: len(r.lanes)])
        assert any("NCCL" in t for t in threads) and any("compute" in t for t in threads)


def test_the_added_tracks_hold_the_analyzers_numbers(exported):
    trace, doc, step = exported["trace"], exported["doc"], exported["step"]
    (cp,) = [c for c in doc["critical_path"] if c["step"] == step]
    path = _events(trace, "X", tid_name=TRACKS[0])
    assert sum(e["dur"] for e in path) == pytest.approx(
        cp["length_us"], abs=2e-3 * max(1, len(path))
    )
    mine = [c for c in doc["collectives"] if c["step"] == step]
    split = _events(trace, "X", tid_name=TRACKS[1])
    waits = [e for e in split if e["name"] == "wait"]
    assert sum(e["dur"] for e in waits) == pytest.approx(
        sum(c["wait_us"] for c in mine), abs=2e-3 * max(1, len(waits))
    )
    assert Counter(e["args"]["collective"] for e in split if e["name"] == "transfer") == Counter(
        {c["key"]: len(c["ranks"]) for c in mine}
    )
    medians = {
        k.signature: k.isolated_median_us
        for k in exported["analysis"].kernel_contention
        if k.isolated_median_us
    }
    contention = _events(trace, "X", tid_name=TRACKS[2])
    assert contention  # the runs have compute kernels with an isolated median
    for e in contention:
        assert e["args"]["isolated_median_us"] == pytest.approx(medians[e["args"]["signature"]])
        assert e["args"]["slowdown"] == pytest.approx(
            e["dur"] / medians[e["args"]["signature"]] - 1, abs=1e-3
        )


def test_tpscope_reads_it_back_with_the_added_tracks(exported):
    back = load_run(exported["path"])
    (r,) = back.ranks  # one file: one trace, every rank's GPUs in it
    kernels = [
        e
        for e in exported["trace"]["traceEvents"]
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    assert len(r.gpu) == len(kernels)
    assert exported["step"] in r.steps.step.tolist()
    # to the ns: each activity where the tables put it, on the aligned clock (metrics.md §6)
    offsets = exported["doc"]["clock_offsets_us"] or {}
    want = []
    for x in exported["run"].ranks:
        m = x.steps.step == exported["step"]
        lo, hi = x.steps.start_ns[m].min(), x.steps.end_ns[m].max()
        keep = (x.gpu.start_ns < hi) & (x.gpu.end_ns > lo)
        want.append(x.gpu.start_ns[keep] - round(offsets.get(str(x.rank), 0) * 1000))
    np.testing.assert_array_equal(np.sort(r.gpu.start_ns), np.sort(np.concatenate(want)))
    names = {r.symbols[i] for i in np.unique(r.annotations.name_id)}
    assert "transfer" in names
    assert ("wait" in names) == any(e["name"] == "wait" for e in exported["trace"]["traceEvents"])
    assert any(n.endswith("vs isolated") for n in names)
    assert names & {"compute", "comm", "gap", "host", "idle", "memory"}  # the critical path's kinds


def test_hta_reads_it_back_with_the_added_tracks(exported):
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(
        trace_files={0: str(exported["path"])}, include_last_profiler_step=True
    )
    frame = analysis.t.get_trace(0)
    symbols = analysis.t.symbol_table.get_sym_table()
    names = Counter(symbols[i] for i in frame["name"].tolist())
    cats = Counter(symbols[i] for i in frame["cat"].tolist())
    events = exported["trace"]["traceEvents"]
    assert cats["kernel"] == sum(e.get("cat") == "kernel" for e in events)
    assert names["transfer"] == sum(e["name"] == "transfer" for e in events) > 0
    assert sum(n for k, n in names.items() if k.endswith("vs isolated")) == len(
        _events(exported["trace"], "X", tid_name=TRACKS[2])
    )


def test_tpscope_export_writes_the_slowest_step_and_refuses_bad_options(tmp_path, capsys):
    out = tmp_path / "step.json"
    assert main(["export", str(RUNS[0]), "-o", str(out)]) == 0
    doc = as_json(analyze_run(load_run(RUNS[0])))
    worst = max(
        {s["step"] for s in doc["steps"]},
        key=lambda n: max(s["step_time_us"] for s in doc["steps"] if s["step"] == n),
    )
    assert json.loads(out.read_text())["traceName"] == f"tpscope step {worst}"
    assert "ui.perfetto.dev" in capsys.readouterr().out
    for argv, message in (
        (["--step", "99"], "--step 99: the run's steps are"),
        (["--ranks", "7"], "--ranks '7'"),
        (["-o", str(tmp_path / "no" / "x.json")], "cannot write"),
    ):
        assert main(["export", str(RUNS[0]), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert main(["export", str(tmp_path / "missing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
