"""metrics.md §7: the critical path across ranks, segment by segment, on hand-built traces whose path
is known (each segment's kind, edge, rank, place and duration), on real runs, and against HTA."""

from __future__ import annotations

import dataclasses
import gzip
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.jsonable import Records, dumps
from tpscope.metrics import analyze_run, as_json, critical_path
from tpscope.metrics.analysis import json_fields
from tpscope.metrics.critical_path import (
    EDGES,
    lane_predecessors,
    other_lane_predecessors,
    resource_holders,
)
from tpscope.trace import load_run
from tpscope.trace.tables import StepWindows

DATA = Path(__file__).resolve().parents[1] / "data"
REPO = Path(__file__).resolve().parents[2]
AG = Collective("_allgather_base", group_size=2)
PARTS = ("compute_us", "comm_us", "memory_us", "host_us", "idle_us")


def _path(tmp_path, ranks, step=None):
    paths = analyze_run(load_run(write_run(tmp_path / "run", ranks))).critical_path
    return paths[0] if step is None else next(p for p in paths if p.step == step)


def _table(p) -> list[tuple]:
    """(start µs, duration µs, kind, edge, inferred, rank, where, name) per segment, in time order."""
    return [
        (
            round(s["start_us"], 3),
            round(s["dur_us"], 3),
            s["kind"],
            s["edge"],
            s["inferred"],
            s["rank"],
            s["where"],
            s["name"],
        )
        for s in p.segments
    ]


def _runtime_call(r: RankTrace, name: str, ts: float, dur: float, tid: int = 100) -> None:
    r.raw(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": name,
            "pid": 100,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "args": {"correlation": 900_000 + int(ts * 10)},
        }
    )


def test_cpu_bound_stretch_is_charged_to_the_cpu_ops_that_delayed_the_launch(tmp_path):
    """The GPU runs `gemm` [0, 80]; the CPU waits for it in cudaStreamSynchronize (returns at 80),
    then spends 270 µs in aten::index (its launch call ends at 350) and 225 µs in aten::cat, whose
    launch call ends at 575; `cat_kernel` starts at 580. `index_kernel` [353, 383] runs beside the
    CPU and is not on the path. The ops outlast their launch calls by 0.5 µs (aten::index ends at
    350.5): host time is cut where an op ends and named by the innermost op holding it. By hand:
    compute 80 + 20, host 270.5 + 224.5 + 5 = 500."""
    r = RankTrace(0, world_size=1)
    r.kernel("gemm", 0, 80, launch_us=(-10, 1))
    _runtime_call(r, "cudaStreamSynchronize", 5, 75)
    r.kernel("index_kernel", 353, 30, launch_us=(347, 3), cpu_op="aten::index")
    r.kernel("cat_kernel", 580, 20, launch_us=(572, 3), cpu_op="aten::cat")
    p = _path(tmp_path, [r])
    assert (p.length_us, p.compute_us, p.host_us, p.idle_us, p.comm_us) == pytest.approx(
        (600, 100, 500, 0, 0)
    )
    assert _table(p) == [
        (0.0, 80.0, "compute", "sync", True, 0, "rank 0 gpu 0 stream 7", "gemm"),
        (80.0, 270.5, "host", "cpu", False, 0, "rank 0 cpu thread 100", "aten::index"),
        (350.5, 224.5, "host", "cpu", False, 0, "rank 0 cpu thread 100", "aten::cat"),
        (575.0, 5.0, "host", "launch", False, 0, "rank 0 gpu 0 stream 7", "cat_kernel"),
        (580.0, 20.0, "compute", "end", False, 0, "rank 0 gpu 0 stream 7", "cat_kernel"),
    ]
    assert p.host_ops_us == pytest.approx({"aten::index": 270.5, "aten::cat": 224.5})
    assert p.inferred_us == pytest.approx(80.0)  # the sync's target is found by timing


def _held_by_another_stream(record_waits: bool) -> RankTrace:
    """Stream 14: an NCCL kernel [0, 106], then `late_comm`, launched at -8 and ready at 106, which
    starts only at 256, when stream 7's GEMM [6, 256] leaves the GPU. By hand: the path is
    late_comm (44 comm), the GEMM (250 compute), 6 µs of launch latency before the GEMM."""
    r = RankTrace(0, world_size=1)
    r.kernel("ncclDevKernel_Generic", 0, 106, stream=14, launch_us=(-10, 1))
    r.kernel("gemm", 6, 250, stream=7, launch_us=(-9, 1))
    r.kernel("ncclDevKernel_late_comm", 256, 44, stream=14, launch_us=(-8, 1))
    if record_waits:  # a trace recorded with cuda_sync events (one wait that binds nothing here)
        r.stream_wait(-7, stream=7, wait_on_stream=14, event_corr=0)
    return r


@pytest.mark.parametrize("record_waits", [True, False])
def test_kernel_held_back_by_another_stream_is_charged_to_what_held_it(tmp_path, record_waits):
    """A gap longer than the tolerance that a recorded stream wait does not explain."""
    p = _path(tmp_path, [_held_by_another_stream(record_waits)])
    # without recorded waits: an unrecorded event wait
    edge = "resource" if record_waits else "event"
    assert (p.length_us, p.comm_us, p.compute_us, p.host_us) == pytest.approx((300, 44, 250, 6))
    assert _table(p) == [
        (0.0, 6.0, "host", "launch", False, 0, "rank 0 gpu 0 stream 7", "gemm"),
        (6.0, 250.0, "compute", edge, True, 0, "rank 0 gpu 0 stream 7", "gemm"),
        (256.0, 44.0, "comm", "end", False, 0, "rank 0 gpu 0 stream 14", "ncclDevKernel_late_comm"),
    ]
    assert p.inferred_share == pytest.approx(250 / 300)


@pytest.mark.parametrize("record_waits", [True, False])
def test_held_kernel_is_charged_to_the_kernel_still_draining_when_it_started(
    tmp_path, record_waits
):
    """Stream 14: `rs_a` [0, 50], then `rs_b`, launched early and ready at 50, which starts at 296
    while stream 7's gemm_b [100, 300] drains its last blocks (gemm_a [0, 100] before it). What
    held rs_b is gemm_b, still running 4 µs into rs_b, not gemm_a, the last to end before rs_b
    started. By hand: gemm_a 100 compute, gemm_b 196 compute (edge resource), rs_b 40 comm; no
    idle."""
    r = RankTrace(0, world_size=1)
    r.kernel("ncclDevKernel_rs_a", 0, 50, stream=14, launch_us=(-12, 1))
    r.kernel("gemm_a", 0, 100, stream=7, launch_us=(-10, 1))
    r.kernel("gemm_b", 100, 200, stream=7, launch_us=(-9, 1))
    r.kernel("ncclDevKernel_rs_b", 296, 40, stream=14, launch_us=(-8, 1))
    if record_waits:
        r.stream_wait(-7, stream=7, wait_on_stream=14, event_corr=0)
    p = _path(tmp_path, [r])
    edge = "resource" if record_waits else "event"
    assert (p.length_us, p.compute_us, p.comm_us, p.idle_us) == pytest.approx((336, 296, 40, 0))
    assert _table(p) == [
        (0.0, 100.0, "compute", "stream", False, 0, "rank 0 gpu 0 stream 7", "gemm_a"),
        (100.0, 196.0, "compute", edge, True, 0, "rank 0 gpu 0 stream 7", "gemm_b"),
        (296.0, 40.0, "comm", "end", False, 0, "rank 0 gpu 0 stream 14", "ncclDevKernel_rs_b"),
    ]


def test_resource_holders_agree_with_brute_force():
    """The holder of each activity, by the definition (metrics.md §7): over the other lanes, the
    activity that started before it, ended after it was ready and by its start plus 10 µs, and
    ended last (a lane's activity still running past that only shared the GPU). Lanes here are
    serial, as streams are."""
    rng = np.random.default_rng(5)
    n, tol = 300, 10_000
    lane = rng.integers(0, 3, n)
    start = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    for k in range(3):  # each lane serial: activities one after another with gaps
        rows = np.flatnonzero(lane == k)
        t = 0
        for i in rows:
            t += int(rng.integers(0, 30_000))
            start[i] = t
            t += int(rng.integers(1_000, 60_000))
            end[i] = t
    ready = start - rng.integers(0, 50_000, n)
    got = resource_holders(lane, start, end, ready, tol)
    for i in range(n):
        cands = [
            j
            for j in range(n)
            if lane[j] != lane[i] and start[j] < start[i] and ready[i] < end[j] <= start[i] + tol
        ]
        if not cands:
            assert got[i] == -1, i
        else:
            assert end[got[i]] == max(end[j] for j in cands), i


def test_collective_late_on_a_sparse_side_stream_goes_through_the_compute_that_ran(tmp_path):
    """Step 2: stream 7 computes [0, 1000] and [1000, 2000]; the collective on stream 14, launched at
    the step's start, starts at 2030; its stream's previous kernel is step 1's. No cross-stream
    kernel ends within 10 µs of it, yet it was held: the path goes through the compute, and the
    30 µs after it are idle, not 2,030 µs of host. The step's period (metrics.md §3) begins where
    step 1's work ended, at -500: the 500 µs until gemm_a starts are the CPU's, which launched it
    at -4 (its call ending at -2)."""
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -800, 790)
    r.cpu_annotation("ProfilerStep#2", -5, 2200)
    r.kernel("ncclDevKernel_AllReduce", -600, 100, stream=14, launch_us=(-700, 2))
    r.kernel("gemm_a", 0, 1000, launch_us=(-4, 2))
    r.kernel("gemm_b", 1000, 1000, launch_us=(-2, 2))
    r.kernel("ncclDevKernel_AllReduce", 2030, 70, stream=14, launch_us=(10, 2))
    p = _path(tmp_path, [r], step=2)
    assert (p.length_us, p.compute_us, p.comm_us, p.idle_us, p.host_us) == pytest.approx(
        (2600, 2000, 70, 30, 500)
    )
    assert _table(p) == [
        (0.0, 498.0, "host", "cpu", False, 0, "rank 0 cpu thread 100", "aten::mm"),
        (498.0, 2.0, "host", "launch", False, 0, "rank 0 gpu 0 stream 7", "gemm_a"),
        (500.0, 1000.0, "compute", "stream", False, 0, "rank 0 gpu 0 stream 7", "gemm_a"),
        (1500.0, 1000.0, "compute", "event", True, 0, "rank 0 gpu 0 stream 7", "gemm_b"),
        (
            2500.0,
            30.0,
            "idle",
            "event",
            True,
            0,
            "rank 0 gpu 0 stream 14",
            "ncclDevKernel_AllReduce",
        ),
        (
            2530.0,
            70.0,
            "comm",
            "end",
            False,
            0,
            "rank 0 gpu 0 stream 14",
            "ncclDevKernel_AllReduce",
        ),
    ]


def _stream_wait_trace(recorded: bool, correlation: bool = False) -> RankTrace:
    """Stream 7: gemm [0, 100], then gemm2 [330, 380], launched at 90, which waits
    (cudaStreamWaitEvent) for stream 14's producer [0, 325]."""
    r0 = RankTrace(0, world_size=1)
    r0.kernel("gemm", 0, 100, launch_us=(-10, 1))
    producer = r0.kernel("producer", 0, 325, stream=14, launch_us=(-9, 1))
    if recorded and not correlation:
        r0.stream_wait(80, stream=7, wait_on_stream=14, event_corr=producer)
    if recorded and correlation:  # as real traces hold it: the wait's own correlation id
        r0.raw(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Wait Event",
                "pid": 0,
                "tid": 7,
                "ts": 80,
                "dur": 0,
                "args": {
                    "device": 0,
                    "stream": 7,
                    "wait_on_stream": 14,
                    "correlation": producer + 1,
                    "wait_on_cuda_event_record_corr_id": producer + 1,
                },
            }
        )
        r0._corr += 1  # the wait took correlation id producer + 1
    r0.kernel("gemm2", 330, 50, launch_us=(90, 1))
    return r0


@pytest.mark.parametrize("recorded,correlation", [(True, False), (True, True), (False, False)])
def test_stream_wait_with_and_without_sync_events(tmp_path, recorded, correlation):
    """With the cuda_sync event the edge is recorded; without it the same edge is inferred (gemm2
    started 5 µs after the producer ended, within the 10 µs tolerance, though gemm ended at 100)."""
    p = _path(tmp_path, [_stream_wait_trace(recorded, correlation)])
    assert (p.length_us, p.compute_us, p.idle_us) == pytest.approx((380, 375, 5))
    assert _table(p) == [
        (0.0, 325.0, "compute", "event", not recorded, 0, "rank 0 gpu 0 stream 14", "producer"),
        (325.0, 5.0, "idle", "event", not recorded, 0, "rank 0 gpu 0 stream 7", "gemm2"),
        (330.0, 50.0, "compute", "end", False, 0, "rank 0 gpu 0 stream 7", "gemm2"),
    ]


def test_late_rank_path_crosses_through_the_collective(tmp_path):
    """Rank 1's GEMM is longer, so rank 0's all-gather waits: the path runs through rank 1's GEMM.
    By hand: rank 0's GEMM [202, 252], a 2 µs stream gap, the all-gather's transfer [150, 200],
    then rank 1, the last to arrive: its GEMM [0, 150]."""
    r0, r1 = RankTrace(0), RankTrace(1)
    r0.kernel("gemm", 0, 100, launch_us=(-20, 1))
    r0.kernel("ncclDevKernel_AllGather", 100, 100, launch_us=(-19, 1), collective=AG)
    r0.kernel("gemm", 202, 50, launch_us=(-18, 1))
    r1.kernel("gemm", 0, 150, launch_us=(-20, 1))
    r1.kernel("ncclDevKernel_AllGather", 150, 50, launch_us=(-19, 1), collective=AG)
    p = _path(tmp_path, [r0, r1])
    assert _table(p) == [
        (0.0, 150.0, "compute", "stream", False, 1, "rank 1 gpu 1 stream 7", "gemm"),
        (
            150.0,
            50.0,
            "comm",
            "collective",
            False,
            0,
            "rank 0 gpu 0 stream 7",
            "ncclDevKernel_AllGather",
        ),
        (200.0, 2.0, "idle", "stream", False, 0, "rank 0 gpu 0 stream 7", "gemm"),
        (202.0, 50.0, "compute", "end", False, 0, "rank 0 gpu 0 stream 7", "gemm"),
    ]
    assert p.ranks == [0, 1] and p.exposed_comm_ratio == pytest.approx(50 / 252)


def test_first_profiled_step_is_marked_and_left_out_of_the_summary(tmp_path):
    r = RankTrace(0, world_size=1)
    # back to back, the first step 50% slower: windows [0, 150), [150, 250), [250, 350) (§3)
    for n, t0, dur in ((1, 0, 150), (2, 150, 100), (3, 250, 100)):
        r.cpu_annotation(f"ProfilerStep#{n}", t0 - 5, dur)
        r.kernel("gemm", t0, dur, launch_us=(t0 - 4, 1))
    run = load_run(write_run(tmp_path / "run", [r]))
    a = analyze_run(run)
    assert [s.first_step for s in a.steps] == [True, False, False]
    assert [p.first_step for p in a.critical_path] == [True, False, False]
    assert a.summary.step_time_us == pytest.approx(100)
    assert analyze_run(run, include_first_step=True).summary.step_time_us == pytest.approx(350 / 3)


def test_predecessor_arrays_agree_with_brute_force():
    rng = np.random.default_rng(3)
    n = 400
    lane = rng.integers(0, 4, n)
    start = np.sort(rng.integers(0, 100_000, n))
    end = start + rng.integers(1, 3_000, n)
    prev = lane_predecessors(lane, start)
    for i in range(n):
        before = [j for j in range(n) if lane[j] == lane[i] and (start[j], j) < (start[i], i)]
        assert prev[i] == (max(before, key=lambda j: (start[j], j)) if before else -1)
    pred = other_lane_predecessors(lane, start, end)
    for i in range(n):
        cands = [j for j in range(n) if lane[j] != lane[i] and end[j] <= start[i]]
        if not cands:
            assert pred[i] == -1
        else:
            assert end[pred[i]] == max(end[j] for j in cands) and lane[pred[i]] != lane[i]


SAMPLE_RUNS = sorted(p for p in (REPO / "sample_traces").iterdir() if p.is_dir())


@pytest.mark.parametrize(
    "folder",
    [
        DATA / "h200-nvlink-unfused",
        DATA / "h200-shm-chunked4",
        *SAMPLE_RUNS,
        *sorted(p for p in (DATA / "foreign-cpu").iterdir() if p.is_dir()),
    ],
    ids=lambda p: p.name,
)
def test_every_segment_of_real_runs_names_its_edge(folder):
    """On every real run (GPU runs, and the CPU jobs on gloo): each segment has a known edge and
    kind, segments tile the path without overlap, and on a GPU run a segment on the CPU is host
    time."""
    a = analyze_run(load_run(folder))
    assert a.critical_path
    for p in a.critical_path:
        assert p.segments
        ends = 0.0
        for s in p.segments:
            assert s["edge"] in EDGES and s["dur_us"] > 0
            assert s["start_us"] >= ends - 1e-3  # no overlap
            ends = s["start_us"] + s["dur_us"]
            if "cpu thread" in s["where"] and not a.cpu_run:
                assert s["kind"] == "host"
        assert sum(getattr(p, f) for f in PARTS) == pytest.approx(p.length_us, rel=1e-6)
        assert 0 <= p.inferred_us <= p.length_us + 1e-6


def test_nested_ranges_loop_every_launched_kernel_lies_in_its_step():
    """A plain loop on one H200 whose ops sit in nested record_function ranges: per step, >= 99% of
    the kernel time launched inside the CPU ProfilerStep lies in tpscope's window (computed here
    from the raw JSON), where Kineto's GPU-side ProfilerStep covers only part of it."""
    folder = REPO / "sample_traces" / "h200x1-nested-loop"
    (file,) = folder.glob("*.pt.trace.json.gz")
    events = [e for e in json.load(gzip.open(file))["traceEvents"] if e.get("ph") == "X"]
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    cpu_steps = {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    }
    gpu_steps = {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#")
    }
    run = load_run(folder)
    w = run.ranks[0].steps
    assert w.source == "cpu_launch"
    base_us = json.load(gzip.open(file))["baseTimeNanoseconds"] / 1000
    missed = []
    for step, (a, b) in cpu_steps.items():
        kernels = [
            e
            for e in events
            if e.get("cat") == "kernel" and a <= launch.get(e["args"]["correlation"], -1) <= b
        ]
        total = sum(e["dur"] for e in kernels)
        lo, hi = [
            x / 1000 - base_us for x in (w.start_ns[w.step == step][0], w.end_ns[w.step == step][0])
        ]
        inside = sum(max(0.0, min(e["ts"] + e["dur"], hi) - max(e["ts"], lo)) for e in kernels)
        assert inside >= 0.99 * total
        ga, gb = gpu_steps.get(step, (0.0, 0.0))
        in_gpu_annotation = sum(
            max(0.0, min(e["ts"] + e["dur"], gb) - max(e["ts"], ga)) for e in kernels
        )
        missed.append(1 - in_gpu_annotation / total)
    assert len(missed) == 6 and min(missed) > 0.1  # what the GPU annotation alone would have missed


def test_nested_ranges_loop_path_reads_the_loss_sync_and_the_host_ops():
    """The loop reads the loss back (`.item()`, aten::_local_scalar_dense) each step: the next step's
    first kernels wait for the CPU, which waited for the GPU there. The path shows that host time by
    op name, and the rest of the step is the GPU's compute."""
    a = analyze_run(load_run(REPO / "sample_traces" / "h200x1-nested-loop"))
    for p in a.critical_path:
        assert "aten::_local_scalar_dense" in p.host_ops_us
        assert p.compute_us > 0.9 * p.length_us
        assert any(s["edge"] == "sync" for s in p.segments)


def test_a_gap_nothing_explains_is_idle_under_no_edge(tmp_path):
    """gemm2 was ready at 100 (stream) and launched long before, yet started at 200 with nothing
    else on the GPU: 100 µs of idle that no edge in the trace explains."""
    r = RankTrace(0, world_size=1)
    r.kernel("gemm", 0, 100, launch_us=(-10, 1))
    r.kernel("gemm2", 200, 50, launch_us=(-9, 1))
    p = _path(tmp_path, [r])
    assert _table(p) == [
        (0.0, 100.0, "compute", "stream", False, 0, "rank 0 gpu 0 stream 7", "gemm"),
        (100.0, 100.0, "idle", "none", False, 0, "rank 0 gpu 0 stream 7", "gemm2"),
        (200.0, 50.0, "compute", "end", False, 0, "rank 0 gpu 0 stream 7", "gemm2"),
    ]


HTA_CASES = [
    # where the CPU ran ahead of the GPU, our path goes back to the kernel the GPU ran then
    (
        "simple_add",
        "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
        {"ampere_sgemm_32x32_sliced1x4_tn"},
    ),
    (
        "alexnet",
        "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
        {
            "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
            "void fft2d_r2c_32x32<float, false, 5u, true>(float2*, float const*, int, int, int,"
            " int, int, int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)",
        },
    ),
    # the pageable copy ends after HTA's path: it is the step's last activity, where ours starts
    ("cuda_event_sync", "ProfilerStep#100", {"Memcpy DtoH (Device -> Pageable)"}),
]


@pytest.mark.parametrize("case,annotation,only_ours", HTA_CASES, ids=[c[0] for c in HTA_CASES])
def test_path_kernels_agree_with_hta(case, annotation, only_ours):
    """HTA's critical_path_analysis over the annotation, and our walk over the GPU work launched in
    it: the same kernels lie on both paths (by correlation id), but for the differences named."""
    import dataclasses
    import logging

    from hta.trace_analysis import TraceAnalysis

    from tpscope.metrics.per_activity import activity_detail, path_segments

    folder = DATA / "hta" / "critical_path" / case
    logging.disable(logging.WARNING)
    try:
        graph, ok = TraceAnalysis(trace_dir=str(folder)).critical_path_analysis(
            rank=0, annotation=annotation, instance_id=0
        )
    finally:
        logging.disable(logging.NOTSET)
    assert ok
    tdf = graph.trace_df
    hta = set(
        tdf[tdf.index.isin(graph.critical_path_events_set) & (tdf["stream"] > 0)][
            "correlation"
        ].astype(int)
    )

    run = load_run(folder)
    rank = run.ranks[0]
    names = np.array([rank.symbols[i] for i in rank.annotations.name_id])
    (k,) = np.flatnonzero((names == annotation) & ~rank.annotations.on_gpu)[:1]
    lo, hi = rank.annotations.start_ns[k], rank.annotations.end_ns[k]
    inside = (rank.gpu.launch_start_ns >= lo) & (rank.gpu.launch_start_ns <= hi)
    gpu = dataclasses.replace(rank.gpu, step=np.where(inside, 0, -1))
    # one step 0: the span of the work launched in the annotation, as HTA's path covers it
    window = StepWindows(
        np.array([0]),
        np.array([rank.gpu.start_ns[inside].min()]),
        np.array([rank.gpu.end_ns[inside].max()]),
        "cpu_launch",
    )
    run = dataclasses.replace(run, ranks=(dataclasses.replace(rank, gpu=gpu, steps=window),))
    seg = path_segments(activity_detail(run), 0)
    ours = {int(gpu.correlation[r]) for r in seg.row[seg.row >= 0].tolist()}  # one rank: its rows
    assert hta and hta <= ours
    name_of = {int(c): rank.symbols[n] for c, n in zip(rank.gpu.correlation, rank.gpu.name_id)}
    assert {name_of[c] for c in ours - hta} == only_ours


def _cpu_event(r: RankTrace, cat: str, name: str, ts: float, dur: float, tid: int, **args) -> None:
    r._ext += 1
    r.raw(
        {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 100,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "args": {"External id": r._ext, **args},
        }
    )


def _cpu_straggler_ranks() -> list[RankTrace]:
    """Two gloo ranks without GPU activity. Main thread 10: `aten::mm` [0, 100], the all-reduce
    issued by `c10d::allreduce_`, which gloo's thread 20 runs, then `aten::div_` once it is done.
    Rank 1 sleeps in record_function("straggle") [105, 305] and issues at 310; rank 0 issues at
    110 and its all-reduce waits for rank 1's. Both all-reduces end at 415."""
    ranks = []
    for rank, issue, div in ((0, 110, 430), (1, 310, 425)):
        r = RankTrace(rank)
        _cpu_event(r, "cpu_op", "aten::mm", 0, 100, 10)
        if rank == 1:
            _cpu_event(r, "user_annotation", "straggle", 105, 200, 10)
        _cpu_event(r, "cpu_op", "c10d::allreduce_", issue, 10, 10)
        dims = {"Input Dims": [[1024]], "Input type": ["float"]}
        _cpu_event(r, "user_annotation", "gloo:all_reduce", issue + 5, 410 - issue, 20, **dims)
        _cpu_event(r, "cpu_op", "aten::div_", div, 10, 10)
        ranks.append(r)
    return ranks


def test_cpu_run_straggler_time_is_host_named_by_its_range(tmp_path):
    """metrics.md §7 on a CPU run, by hand: rank 0's step ends with aten::div_ [430, 440], which
    its thread reached 15 µs after the all-reduce it issued and waited for ended (host, `thread`);
    the all-reduce's transfer [315, 415] after rank 1 arrived (`collective`); rank 1's all-reduce
    waited for its issuing thread: 10 µs of issuing, the 200 µs sleep named `straggle`, 5 µs
    before it, all host on thread 10 (`thread`), back to its aten::mm [0, 100]."""
    p = _path(tmp_path, _cpu_straggler_ranks())
    r1, r0 = "rank 1 cpu thread 10", "rank 0 cpu thread 10"
    assert _table(p) == [
        (0.0, 100.0, "compute", "thread", True, 1, r1, "aten::mm"),
        (100.0, 5.0, "host", "thread", True, 1, r1, "c10d::allreduce_"),
        (105.0, 200.0, "host", "thread", True, 1, r1, "straggle"),
        (305.0, 10.0, "host", "thread", True, 1, r1, "c10d::allreduce_"),
        (315.0, 100.0, "comm", "collective", False, 0, "rank 0 cpu thread 20", "gloo:all_reduce"),
        (415.0, 15.0, "host", "thread", True, 0, r0, "aten::div_"),
        (430.0, 10.0, "compute", "end", False, 0, r0, "aten::div_"),
    ]
    assert (p.length_us, p.compute_us, p.comm_us, p.host_us, p.idle_us) == pytest.approx(
        (440, 110, 100, 230, 0)
    )
    assert p.host_ops_us == pytest.approx(
        {"straggle": 200.0, "aten::div_": 15.0, "c10d::allreduce_": 15.0}
    )


def test_cpu_run_gap_on_a_thread_is_host_named_by_the_innermost_range(tmp_path):
    """One CPU thread: aten::mm [0, 100], then Python inside record_function("outer") [110, 400]
    holding record_function("inner") [150, 250], then aten::add [400, 420]. By hand: the 300 µs
    gap is host (`cpu`), 10 µs of it held by nothing (named by the op it leads to), 40 + 150 by
    `outer`, 100 by `inner`."""
    r = RankTrace(0, world_size=1)
    _cpu_event(r, "cpu_op", "aten::mm", 0, 100, 10)
    _cpu_event(r, "user_annotation", "outer", 110, 290, 10)
    _cpu_event(r, "user_annotation", "inner", 150, 100, 10)
    _cpu_event(r, "cpu_op", "aten::add", 400, 20, 10)
    p = _path(tmp_path, [r])
    w = "rank 0 cpu thread 10"
    assert _table(p) == [
        (0.0, 100.0, "compute", "stream", False, 0, w, "aten::mm"),
        (100.0, 10.0, "host", "cpu", False, 0, w, "aten::add"),
        (110.0, 40.0, "host", "cpu", False, 0, w, "outer"),
        (150.0, 100.0, "host", "cpu", False, 0, w, "inner"),
        (250.0, 150.0, "host", "cpu", False, 0, w, "outer"),
        (400.0, 20.0, "compute", "end", False, 0, w, "aten::add"),
    ]
    assert p.host_ops_us == pytest.approx({"outer": 190.0, "inner": 100.0, "aten::add": 10.0})


def test_straggler_job_path_names_the_sleep_on_rank_1():
    """The gloo straggler job (tests/data/foreign-cpu/straggler): rank 1 sleeps in
    record_function("straggle") before each step's first all-reduce. Per step, the path's host
    time on rank 1 named `straggle` is within 10% of that range's duration in the raw JSON."""
    folder = DATA / "foreign-cpu" / "straggler"
    (file,) = folder.glob("rank1.*.pt.trace.json.gz")
    events = json.load(gzip.open(file))["traceEvents"]
    sleeps = sorted(e["dur"] for e in events if e.get("ph") == "X" and e.get("name") == "straggle")
    a = analyze_run(load_run(folder))
    named = sorted(
        sum(
            s["dur_us"]
            for s in p.segments
            if s["rank"] == 1 and s["kind"] == "host" and s["name"] == "straggle"
        )
        for p in a.critical_path
    )
    assert len(named) == len(sleeps) == 3
    for got, slept in zip(named, sleeps):
        assert got == pytest.approx(slept, rel=0.10)


def test_blocked_thread_hands_the_path_to_the_thread_that_worked(tmp_path):
    """The main thread (100) launches k1 [0, 50], then blocks in backward() (its
    `## backward ##` range [12, 400] holds no op and no call) while the autograd thread (200) works
    in `evaluate_function: MmBackward0` [20, 380] and launches k2 (call [370, 375], k2 [378, 400]).
    Back from backward(), the main thread launches k3 (aten::add, call [405, 408]), which starts at
    410. By hand: k3's launch is binding; the main thread's time before it back to its idle stretch
    [0, 404.5] is host; the path leaves the main thread for k2's launch, the other thread's last
    call in that stretch (the main thread's 29.5 µs of waking up after it: `thread`, inferred),
    and the autograd thread's time back to the floor is host, named by its ops."""
    r = RankTrace(0, world_size=1)
    r.kernel("k1", 0, 50, launch_us=(-10, 1))
    r.cpu_annotation("## backward ##", 12, 388)
    _cpu_event(r, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", 20, 360, 200)
    corr = r.kernel("k2", 378, 22)
    _cpu_event(r, "cpu_op", "aten::mm", 369.5, 6, 200)
    ext = r._ext
    r.raw(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 100,
            "tid": 200,
            "ts": 370,
            "dur": 5,
            "args": {"correlation": corr, "External id": ext},
        }
    )
    r.kernel("k3", 410, 20, launch_us=(405, 3), cpu_op="aten::add")
    p = _path(tmp_path, [r])
    main, autograd, gpu = "rank 0 cpu thread 100", "rank 0 cpu thread 200", "rank 0 gpu 0 stream 7"
    assert _table(p) == [
        (0.0, 20.0, "host", "cpu", False, 0, autograd, "aten::mm"),
        (
            20.0,
            349.5,
            "host",
            "cpu",
            False,
            0,
            autograd,
            "autograd::engine::evaluate_function: MmBackward0",
        ),
        (369.5, 5.5, "host", "cpu", False, 0, autograd, "aten::mm"),
        (375.0, 25.0, "host", "thread", True, 0, main, "## backward ##"),
        (400.0, 4.5, "host", "thread", True, 0, main, "aten::add"),
        (404.5, 3.5, "host", "cpu", False, 0, main, "aten::add"),
        (408.0, 2.0, "host", "launch", False, 0, gpu, "k3"),
        (410.0, 20.0, "compute", "end", False, 0, gpu, "k3"),
    ]
    assert p.inferred_us == pytest.approx(29.5)


def test_path_leaves_the_cpu_where_the_thread_ran_ahead_of_the_gpu(tmp_path):
    """The thread launches k1 [0, 500], then k2 (call ends at 22), which waits behind k1 until
    500: there the thread was ahead of the GPU. It then works in aten::index [30, 590] and launches
    k3 (call [620, 623]), which starts at 625, the GPU idle since k2 ended at 520. By hand: k3 and
    its launch latency, the thread's host time back to 22 (named by the ops holding it), then the
    GPU's k1, running at 22 (`launch`, inferred)."""
    r = RankTrace(0, world_size=1)
    r.kernel("k1", 0, 500, launch_us=(-10, 1))
    r.kernel("k2", 500, 20, launch_us=(20, 2))
    _cpu_event(r, "cpu_op", "aten::index", 30, 560, 100)
    r.kernel("k3", 625, 20, launch_us=(620, 3), cpu_op="aten::add")
    p = _path(tmp_path, [r])
    cpu, gpu = "rank 0 cpu thread 100", "rank 0 gpu 0 stream 7"
    assert _table(p) == [
        (0.0, 22.0, "compute", "launch", True, 0, gpu, "k1"),
        (22.0, 0.5, "host", "cpu", False, 0, cpu, "aten::mm"),
        (22.5, 7.5, "host", "cpu", False, 0, cpu, "aten::add"),
        (30.0, 560.0, "host", "cpu", False, 0, cpu, "aten::index"),
        (590.0, 33.0, "host", "cpu", False, 0, cpu, "aten::add"),
        (623.0, 2.0, "host", "launch", False, 0, gpu, "k3"),
        (625.0, 20.0, "compute", "end", False, 0, gpu, "k3"),
    ]


@pytest.mark.parametrize(
    "folder",
    [REPO / "sample_traces" / "h200x2-nvlink-none", DATA / "foreign-cpu" / "pipeline"],
    ids=["gpu-two-ranks", "cpu-run"],
)
@pytest.mark.parametrize("workers, part_min", [(3, 10**9), (16, 7)], ids=["whole", "in-slices"])
def test_steps_walked_in_worker_processes_give_the_same_paths_and_text(
    monkeypatch, folder, workers, part_min
):
    """The steps' walks in forked processes (`--workers`, a big run) give the paths one process
    gives, and the segments' JSON text the workers wrote (whole, or a slice each by processes
    the walking one forked) is the text of those segments."""
    run = load_run(folder, workers=1)
    alone = analyze_run(run)
    monkeypatch.setattr(critical_path, "PARALLEL_MIN_ACTIVITIES", 0)
    monkeypatch.setattr(critical_path, "TEXT_PART_MIN_SEGMENTS", part_min)
    forked = analyze_run(run, workers=workers)
    assert len(alone.critical_path) > 1
    assert forked.critical_path == alone.critical_path
    for p in forked.critical_path:
        assert isinstance(p.segments, Records)
        assert json.loads(p.segments.text) == p.segments
    assert dumps(json_fields(forked)) == json.dumps(as_json(alone), indent=1)


def test_a_single_step_is_walked_here_and_its_segments_written_in_slices(monkeypatch):
    """One step and many workers: the walk stays here, its segments are written by forked
    processes a slice each (their text the text of the whole), into memory read back here."""
    run = load_run(DATA / "foreign-cpu" / "pipeline", workers=1)
    alone = analyze_run(run)
    first = alone.critical_path[0]
    monkeypatch.setattr(critical_path, "PARALLEL_MIN_ACTIVITIES", 0)
    monkeypatch.setattr(critical_path, "TEXT_PART_MIN_SEGMENTS", 3)
    real_plan, real_forked, writers = critical_path.step_plan, critical_path.Forked, []
    monkeypatch.setattr(critical_path, "step_plan", lambda *a: real_plan(*a)[:1])

    def counted(task, n, workers):
        writers.append((n, workers))
        return real_forked(task, n, workers)

    monkeypatch.setattr(critical_path, "Forked", counted)
    paths = analyze_run(run, workers=8).critical_path
    assert len(paths) == 1 and writers == [(4, 4)]  # TEXT_PARTS_MAX slices
    assert paths[0].segments == first.segments and paths[0].segments.n >= 12
    assert paths[0].segments.text == json.dumps(list(first.segments), indent=1).replace(
        "\n", "\n" + " " * critical_path.SEGMENTS_INDENT
    )


def test_steps_are_forked_from_three_workers_only(monkeypatch):
    """Two workers walk the steps in this process (forking gained nothing on two cores); three
    fork them, one task per step."""
    run = load_run(DATA / "foreign-cpu" / "pipeline", workers=1)
    monkeypatch.setattr(critical_path, "PARALLEL_MIN_ACTIVITIES", 0)
    calls = []
    real = critical_path.Forked

    def counted(task, n, workers):
        calls.append((n, workers))
        return real(task, n, workers)

    monkeypatch.setattr(critical_path, "Forked", counted)
    steps = len(analyze_run(run, workers=2).critical_path)
    assert steps > 1 and calls == []
    analyze_run(run, workers=3)
    assert calls == [(steps, 3)]


def test_host_stretches_found_apart_from_the_walk_over_forked_processes_are_those_found_in_it(
    monkeypatch,
):
    """A launch-bound foreign rank: its walk's host stretches, handed in batches to processes
    forked while it goes on (at most workers - 1 at once) and the last ones shared out after it,
    then put back where they belong, give the path the walk gives when it finds each stretch as
    it goes."""
    run = load_run(REPO / "tests" / "data" / "real" / "tracelens-b200-eager-rank0of8", workers=1)
    alone = analyze_run(run)
    monkeypatch.setattr(critical_path, "PARALLEL_MIN_ACTIVITIES", 0)
    monkeypatch.setattr(critical_path, "EXPAND_MIN_STRETCHES", 5)
    monkeypatch.setattr(critical_path, "EXPAND_LAST_MIN_STRETCHES", 1)
    real_map, real_call, shares, batches, most = (
        critical_path.map_forked,
        critical_path.ForkedCall,
        [],
        [],
        [0],
    )

    def counted_map(task, n, workers):
        shares.append(n)
        return real_map(task, n, workers)

    def counted_call(task):
        call = real_call(task)
        batches.append(call)
        most[0] = max(most[0], sum(1 for c in batches if c._pid is not None and not c.done()))
        return call

    monkeypatch.setattr(critical_path, "map_forked", counted_map)
    monkeypatch.setattr(critical_path, "ForkedCall", counted_call)
    forked = analyze_run(run, workers=3)
    assert len(batches) >= 2 and 1 <= most[0] <= 2  # handed out during the walk, two at most
    assert shares and shares[0] >= 1  # the stretches left at the end
    assert forked.critical_path == alone.critical_path
    assert all(p.host_us > 0 for p in alone.critical_path)  # host stretches were on the path


def test_deferred_rows_are_spliced_in_where_they_were_added():
    """`_spliced` against inserting each stretch's rows one at a time into a list."""
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 100, (40, 10))
    at = np.sort(rng.integers(0, 41, 12))
    counts = rng.integers(0, 4, 12)
    pieces = rng.integers(1000, 2000, (int(counts.sum()), 10))
    want, done, k = [], 0, 0
    for i in range(len(rows) + 1):
        while k < len(at) and at[k] == i:
            want += pieces[done : done + counts[k]].tolist()
            done += counts[k]
            k += 1
        if i < len(rows):
            want.append(rows[i].tolist())
    assert critical_path._spliced(rows, at, counts, pieces).tolist() == want


def _same(a, b) -> bool:
    """Deep equality over what a rank graph holds: dataclasses, dicts, tuples, arrays."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            _same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(
    "run_dir",
    [DATA / "foreign-cpu" / "pipeline", REPO / "sample_traces" / "h200x2-shm-chunked"],
    ids=["cpu-run", "gpu-run"],
)
def test_a_rank_graph_built_over_two_threads_is_the_one_built_in_one(monkeypatch, run_dir):
    """With two threads, the host names are indexed in a thread of their own; the graph (a CPU
    run's issuing ops' labels among it) is the one the single thread builds."""
    from tpscope.metrics.per_activity import activity_detail

    run = load_run(run_dir, workers=1)
    graph = activity_detail(run).graph
    real, threads = critical_path.host_names, []

    def recorded(r, shift):
        threads.append(threading.get_ident())
        return real(r, shift)

    monkeypatch.setattr(critical_path, "host_names", recorded)
    for pos, r in enumerate(run.ranks):
        args = (graph.acts, graph.instance, r, pos, graph.offsets_ns)
        one, two = critical_path.rank_graph(*args, 1), critical_path.rank_graph(*args, 2)
        assert _same(one, two)
        assert (one.issuer_label is not None) == r.cpu_run
    assert threads[0::2] == [threading.get_ident()] * len(run.ranks)
    assert threading.get_ident() not in threads[1::2]
