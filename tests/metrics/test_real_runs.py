"""metrics.md §4 on real 2-rank H200 runs, against a brute-force count at 1 ns resolution."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tpscope.metrics import analyze_run
from tpscope.trace import load_run

DATA = Path(__file__).resolve().parent.parent / "data"
RUNS = ["h200-nvlink-unfused", "h200-shm-chunked4"]


def brute_force(path: Path) -> dict[int, dict[str, float]]:
    """Per step: every §4 field from the raw JSON, one boolean cell per nanosecond (metrics.md §3
    windows)."""
    doc = json.load(gzip.open(path))
    base = doc.get("baseTimeNanoseconds", 0)
    ns = lambda us: base + int(round(us * 1000))  # noqa: E731
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    # metrics.md §3 rule 1: the GPU activities whose launch call lies in the CPU ProfilerStep#N
    cpu_steps = [
        (int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    ]
    launch_ts = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    steps = {}
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        t = launch_ts.get(e["args"].get("correlation"))
        for n, a, b in cpu_steps:
            if t is not None and a <= t <= b:
                lo, hi = ns(e["ts"]), ns(e["ts"]) + int(round(e["dur"] * 1000))
                old = steps.get(n, (lo, hi))
                steps[n] = (min(lo, old[0]), max(hi, old[1]))
    # the windows partition the timeline: step N from the end of step N-1's window (the first
    # profiled step from its own first activity) to the end of its last activity
    windows, prev = {}, None
    for n in sorted(steps):
        lo, hi = steps[n]
        if prev is not None and n - 1 in windows:
            lo, hi = prev, max(hi, prev)
        windows[n] = (lo, hi)
        prev = hi
    out = {}
    for n, (lo, hi) in windows.items():
        cells = {c: np.zeros(hi - lo, bool) for c in ("compute", "comm", "memory")}
        for e in events:
            if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
                continue
            if e["cat"] == "kernel":
                cls = "comm" if e["name"].lower().startswith("nccl") else "compute"
            else:
                cls = "comm" if "PtoP" in e["name"] else "memory"
            a = ns(e["ts"]) - lo
            b = a + int(round(e["dur"] * 1000))
            cells[cls][max(a, 0) : max(min(b, hi - lo), 0)] = True
        hidden = (cells["comm"] & cells["compute"]).sum()
        busy = (cells["comm"] | cells["compute"] | cells["memory"]).sum()
        comm, compute = cells["comm"].sum(), cells["compute"].sum()
        out[n] = {
            "step_time_us": (hi - lo) / 1000,
            "compute_us": compute / 1000,
            "comm_us": comm / 1000,
            "memory_us": cells["memory"].sum() / 1000,
            "idle_us": (hi - lo - busy) / 1000,
            "hidden_comm_us": hidden / 1000,
            "exposed_comm_us": (comm - hidden) / 1000,
            "overlap_ratio": hidden / comm,
            "hidden_of_hideable_ratio": hidden / min(comm, compute),
            "exposed_comm_ratio": (comm - hidden) / (hi - lo),
        }
    return out


@pytest.mark.parametrize("name", RUNS)
def test_every_field_equals_brute_force(name):
    run = load_run(DATA / name)
    analysis = analyze_run(run)
    assert len(run.ranks) == 2
    for rank in run.ranks:
        expected = brute_force(rank.path)
        got = {s.step: s for s in analysis.steps if s.rank == rank.rank}
        assert set(got) == set(expected) and len(got) == 3
        for step, fields in expected.items():
            for field, value in fields.items():
                assert getattr(got[step], field) == pytest.approx(value, rel=1e-3, abs=1e-3), (
                    rank.rank,
                    step,
                    field,
                )
