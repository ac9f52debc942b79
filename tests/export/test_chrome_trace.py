"""The exported step (tpscope/export/chrome_trace.py) on the real H200 runs and a CPU run: the Trace
Event Format's rules (one id per flow, no two events on a thread overlapping without nesting), the
activities the trace tables hold, the analyzer's numbers on the added tracks, and the folder read
back by tpscope and by HTA as the same ranks with the same per-step numbers.

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
from tpscope.export.chrome_trace import TRACKS, rank_traces, trace_file_name, trace_text
from tpscope.metrics import analyze_run, as_json
from tpscope.metrics.per_activity import activity_detail
from tpscope.trace import load_run

DATA = Path(__file__).resolve().parent.parent / "data"
RUNS = [DATA / "h200-shm-chunked4", DATA / "h200-nvlink-unfused"]
CPU_RUN = DATA / "cpu-gloo-tiny"
PHASES = {"X", "M", "s", "f"}
META = {"process_name", "process_sort_index", "process_labels", "thread_name", "thread_sort_index"}


@pytest.fixture(scope="module", params=RUNS, ids=lambda p: p.name)
def exported(request, tmp_path_factory):
    run = load_run(request.param)
    analysis = analyze_run(run)
    doc = as_json(analysis)
    step = sorted({s["step"] for s in doc["steps"]})[1]
    traces = rank_traces(
        run, activity_detail(run), step, None, doc["clock_offsets_us"], analysis.kernel_contention
    )
    path = tmp_path_factory.mktemp("export") / f"{request.param.name}-step-{step}"
    path.mkdir()
    for rank, t in traces.items():
        (path / trace_file_name(rank, t)).write_text(trace_text(t), encoding="utf-8")
    back = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(path.iterdir())]
    # the ranks' events in one list (each rank is its own process, pid = rank)
    trace = {"traceEvents": [e for t in back for e in t["traceEvents"]], "files": back}
    return {
        "run": run,
        "doc": doc,
        "analysis": analysis,
        "step": step,
        "trace": trace,
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
    _flows_and_nesting(exported["trace"])


def _flows_and_nesting(trace):
    events = trace["traceEvents"]
    # flows: one start and one end per id in each file (pid), the end bound to the enclosing slice,
    # never before its start
    flows = [e for e in events if e["ph"] == "s"]
    starts = {(e["pid"], e["cat"], e["id"]): e for e in flows}
    ends = {(e["pid"], e["cat"], e["id"]): e for e in events if e["ph"] == "f"}
    assert len(starts) == len(flows) and starts.keys() == ends.keys()
    slices = {}
    for x in _events(trace, "X"):
        slices.setdefault((x["pid"], x["tid"]), []).append(x)
    for k, s in starts.items():
        assert ends[k]["bp"] == "e" and ends[k]["ts"] >= s["ts"] - 1e-3
        f = ends[k]
        target = [
            x for x in slices[(f["pid"], f["tid"])] if x["ts"] <= f["ts"] <= x["ts"] + x["dur"]
        ]
        assert target, f  # the arrow lands on a GPU activity
    # on each thread, two slices either nest or do not overlap (in integer ns, as Perfetto reads them)
    for key, xs in slices.items():
        spans = sorted((round(x["ts"] * 1000), -round(x["dur"] * 1000)) for x in xs)
        stack: list[int] = []
        for a, neg in spans:
            b = a - neg
            while stack and stack[-1] <= a:
                stack.pop()
            assert not stack or b <= stack[-1], (key, a, b, stack[-1])
            stack.append(b)


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


def test_tpscope_reads_it_back_as_the_same_ranks_with_the_added_tracks(exported):
    back = load_run(exported["path"])
    assert [r.rank for r in back.ranks] == [r.rank for r in exported["run"].ranks]
    offsets = exported["doc"]["clock_offsets_us"] or {}
    path_kinds = set()
    for r, x in zip(back.ranks, exported["run"].ranks):
        kernels = [
            e
            for e in exported["trace"]["traceEvents"]
            if e["pid"] == x.rank and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        ]
        assert len(r.gpu) == len(kernels)
        assert exported["step"] in r.steps.step.tolist()
        # to the ns: each activity where the tables put it, on the aligned clock (metrics.md §6)
        m = x.steps.step == exported["step"]
        lo, hi = x.steps.start_ns[m].min(), x.steps.end_ns[m].max()
        keep = (x.gpu.start_ns < hi) & (x.gpu.end_ns > lo)
        want = x.gpu.start_ns[keep] - round(offsets.get(str(x.rank), 0) * 1000)
        np.testing.assert_array_equal(np.sort(r.gpu.start_ns), np.sort(want))
        names = {r.symbols[i] for i in np.unique(r.annotations.name_id)}
        assert "transfer" in names
        assert any(n.endswith("vs isolated") for n in names)
        path_kinds |= names & {"compute", "comm", "gap", "host", "idle", "memory"}
    assert path_kinds  # the critical path, on the ranks it runs on


def test_hta_reads_the_folder_as_the_same_ranks(exported):
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(exported["path"]), include_last_profiler_step=True)
    assert sorted(analysis.t.get_ranks()) == [r.rank for r in exported["run"].ranks]
    symbols = analysis.t.symbol_table.get_sym_table()
    for rank in analysis.t.get_ranks():
        frame = analysis.t.get_trace(rank)
        names = Counter(symbols[i] for i in frame["name"].tolist())
        cats = Counter(symbols[i] for i in frame["cat"].tolist())
        events = [e for e in exported["trace"]["traceEvents"] if e["pid"] == rank]
        assert cats["kernel"] == sum(e.get("cat") == "kernel" for e in events) > 0
        assert names["transfer"] == sum(e["name"] == "transfer" for e in events) > 0
        assert sum(n for k, n in names.items() if k.endswith("vs isolated")) == sum(
            1 for e in _events(exported["trace"], "X", tid_name=TRACKS[2]) if e["pid"] == rank
        )


def _per_step(doc) -> dict:
    return {
        (s["rank"], s["step"]): (s["step_time_us"], s["compute_us"], s["comm_us"])
        for s in doc["steps"]
    }


@pytest.mark.parametrize("run", [RUNS[0], CPU_RUN], ids=lambda p: p.name)
def test_an_export_of_every_step_analyzes_as_the_run(run, tmp_path, capsys):
    out = tmp_path / "exported"
    assert main(["export", str(run), "--all-steps", "--out", str(out)]) == 0
    assert "2 rank files" in capsys.readouterr().out
    files = sorted(out.iterdir())
    heads = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    assert [h["distributedInfo"]["rank"] for h in heads] == [0, 1]
    for p in files:  # the profiler's spelling: HTA finds a file's rank by it; names as UTF-8
        text = p.read_text(encoding="utf-8")
        assert '"rank": ' in text[:200] and "\\u00b7" not in text and "·" in text
    trace = {"traceEvents": [e for h in heads for e in h["traceEvents"]]}
    _flows_and_nesting(trace)
    want = as_json(analyze_run(load_run(run)))
    got = as_json(analyze_run(load_run(out)))
    assert got["ranks"] == want["ranks"] and got["cpu_run"] == want["cpu_run"]
    w, g = _per_step(want), _per_step(got)
    assert g.keys() == w.keys()
    for k in w:  # per rank and step: the same step time, compute and communication
        assert g[k] == pytest.approx(w[k], rel=0.02, abs=2.0), k
    threads = {
        e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    procs = {
        e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    if want["cpu_run"]:  # a CPU run's lanes are threads, its process no GPU
        assert procs == {"rank 0 · CPU", "rank 1 · CPU"}
        assert not any(t.startswith("stream ") or "NCCL" in t for t in threads), threads
        assert any(t.startswith("thread ") and "collectives" in t for t in threads), threads
    from hta.trace_analysis import TraceAnalysis

    hta = TraceAnalysis(trace_dir=str(out), include_last_profiler_step=True)
    assert sorted(hta.t.get_ranks()) == want["ranks"]


def test_tpscope_export_writes_a_new_folder_and_never_overwrites(tmp_path, capsys):
    run = tmp_path / "logs" / "run-a"
    run.mkdir(parents=True)
    for p in RUNS[0].iterdir():
        (run / p.name).write_bytes(p.read_bytes())
    kept = {p.name: p.read_bytes() for p in run.iterdir()}
    assert main(["export", str(run)]) == 0
    doc = as_json(analyze_run(load_run(RUNS[0])))
    steady = [s for s in doc["steps"] if not s["first_step"]]  # the warm-up left out
    worst = max(
        {s["step"] for s in steady},
        key=lambda n: max(s["step_time_us"] for s in steady if s["step"] == n),
    )
    out = run.parent / f"run-a-export-step-{worst}"  # beside the run, never in it
    assert sorted(p.name for p in run.parent.iterdir()) == ["run-a", out.name]
    assert {p.name: p.read_bytes() for p in run.iterdir()} == kept
    files = sorted(out.iterdir())
    assert len(files) == 2 and all(
        f"step {worst}" in json.loads(p.read_text())["traceName"] for p in files
    )
    assert "ui.perfetto.dev" in capsys.readouterr().out
    # a rank file given: the output still goes beside the run's folder
    assert main(["export", str(run / next(iter(sorted(kept)))), "--step", str(worst)]) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    before = {p.stat().st_ino for p in files}
    assert main(["export", str(run), "--overwrite"]) == 0
    capsys.readouterr()
    assert len(list(out.iterdir())) == 2 and not [
        p for p in run.parent.iterdir() if p.name.startswith(".")
    ]
    assert not {p.stat().st_ino for p in out.iterdir()} & before  # new files, renamed into place
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    for argv, message in (
        (["--step", "99"], "--step 99: the run's steps are"),
        (["--ranks", "7"], "--ranks '7'"),
        (["--out", str(run)], "the run's own folder"),
        (["--out", str(run / "sub")], "the run's own folder"),
        (["--out", str(run.parent), "--overwrite"], "the run's own folder"),
        (["--out", str(tmp_path / "notes")], "already exists; pass --overwrite"),
        (["--out", str(tmp_path / "notes"), "--overwrite"], "holds mine.txt, not an output"),
        (["--out", str(tmp_path / "notes" / "mine.txt")], "exists and is not a folder"),
        (["--out", str(tmp_path / "notes" / "mine.txt" / "x")], "not a folder"),
    ):
        assert main(["export", str(run), *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert (tmp_path / "notes" / "mine.txt").read_text() == "keep"
    assert {p.name: p.read_bytes() for p in run.iterdir()} == kept
    assert main(["export", str(tmp_path / "missing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
