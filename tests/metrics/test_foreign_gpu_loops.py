"""metrics.md §3 and §7 on training loops written with PyTorch's own APIs and recorded on one H200
(`benchmarks/foreign_gpu_loops.py`): each step's time is its period, as CUDA events recorded on the
main stream measured it in the same run, and on a GPU-bound loop the critical path is as much GPU
as the GPU was busy, computed here from the raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tpscope.metrics import analyze_run
from tpscope.trace import load_run

REPO = Path(__file__).resolve().parents[2]
PERIODS = REPO / "benchmarks" / "results" / "h200x1-foreign-loops-2026-12-02"
LOOPS = ("prefetch", "gpt2", "gpt2-compiled", "gpt2-cpubound")
GPU_BOUND = ("prefetch", "gpt2", "gpt2-compiled")


def _folder(loop: str) -> Path:
    return REPO / "sample_traces" / f"h200x1-foreign-{loop}"


def _raw_events(loop: str) -> list[dict]:
    (file,) = _folder(loop).glob("*.pt.trace.json.gz")
    return [e for e in json.load(gzip.open(file))["traceEvents"] if e.get("ph") == "X"]


def _busy_share(events: list[dict], lo_us: float, hi_us: float) -> float:
    """The share of [lo, hi] during which a kernel, copy or set ran (a brute-force union)."""
    iv = sorted(
        (max(e["ts"], lo_us), min(e["ts"] + e["dur"], hi_us))
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and e["ts"] < hi_us
        and e["ts"] + e["dur"] > lo_us
    )
    busy, end = 0.0, lo_us
    for s, e in iv:
        if e > end:
            busy += e - max(s, end)
            end = e
    return busy / (hi_us - lo_us)


@pytest.fixture(scope="module")
def analyses():
    return {loop: analyze_run(load_run(_folder(loop))) for loop in LOOPS}


@pytest.mark.parametrize("loop", LOOPS)
def test_each_step_lasts_its_period(analyses, loop):
    """After the first profiled step, every step's time and its critical path's length are within
    2% of the CUDA-event period of that step; on the prefetch loop the spans of launched work grow
    (the CPU runs ahead) while the period stays at about 11.6 ms."""
    recorded = json.loads((PERIODS / f"{loop}_step_times.json").read_text())
    period_ms = recorded["period_ms"]
    steps = [s for s in analyses[loop].steps if s.rank == 0]
    first = min(s.step for s in steps)
    assert first == recorded["profiled_from"]
    checked = 0
    for s in steps:
        if s.step == first:
            continue
        assert s.step_time_us / 1e3 == pytest.approx(period_ms[s.step], rel=0.02), s.step
        (path,) = [p for p in analyses[loop].critical_path if p.step == s.step]
        assert path.length_us / 1e3 == pytest.approx(period_ms[s.step], rel=0.02), s.step
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("loop", GPU_BOUND)
def test_the_path_of_a_gpu_bound_loop_is_as_busy_as_its_gpu(analyses, loop):
    """The path's GPU share (compute, communication, memory) is within 5 points of the share of the
    step during which the GPU ran something, computed from the raw events."""
    a = analyses[loop]
    events = _raw_events(loop)
    (file,) = _folder(loop).glob("*.pt.trace.json.gz")
    base_us = json.load(gzip.open(file)).get("baseTimeNanoseconds", 0) / 1000
    w = load_run(_folder(loop)).ranks[0].steps
    first = int(w.step.min())
    for p in a.critical_path:
        if p.step == first:
            continue
        i = int(np.flatnonzero(w.step == p.step)[0])
        lo, hi = w.start_ns[i] / 1000 - base_us, w.end_ns[i] / 1000 - base_us
        busy = _busy_share(events, lo, hi)
        gpu = (p.compute_us + p.comm_us + p.memory_us) / p.length_us
        assert busy > 0.8  # the loop is GPU-bound
        assert gpu == pytest.approx(busy, abs=0.05), (p.step, gpu, busy)
