"""Step windows (metrics.md §3): CPU steps through the launch calls' correlation ids first, then
GPU annotations, then one window."""

import pytest

from tests.kineto import RankTrace, raw_gpu_ticks, run_ahead_rank, write_run
from tpscope.metrics import analyze_run
from tpscope.trace import load_run


def windows(tmp_path, r: RankTrace):
    run = load_run(write_run(tmp_path / "run", [r]))
    w = run.ranks[0].steps
    base = run.ranks[0].gpu.start_ns.min() if len(run.ranks[0].gpu) else 0
    return (
        w.source,
        w.step.tolist(),
        ((w.start_ns - base) / 1000).tolist(),
        ((w.end_ns - base) / 1000).tolist(),
    )


def test_steps_from_gpu_annotations(tmp_path):
    r = RankTrace(0, world_size=1)
    r.kernel("gemm", 0, 10)
    r.gpu_annotation("ProfilerStep#5", 0, 40)
    r.gpu_annotation("ProfilerStep#6", 50, 30)
    r.gpu_annotation("ProfilerStep#6", 60, 40)  # a second lane: the window is the min..max
    r.cpu_annotation("ProfilerStep#5", -100, 10)  # holds no launch (the kernel has none): not used
    source, steps, lo, hi = windows(tmp_path, r)
    assert source == "gpu_annotation"
    # the windows partition the timeline: step 6's runs from step 5's end (metrics.md §3)
    assert steps == [5, 6] and lo == [0, 40] and hi == [40, 100]


def test_steps_from_cpu_annotations_through_correlation(tmp_path):
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", 0, 100)
    r.cpu_annotation("ProfilerStep#2", 100, 100)
    r.kernel("a", 10, 20, launch_us=(5, 2))  # launched in step 1
    r.kernel("b", 150, 30, launch_us=(90, 2))  # launched in step 1, runs late
    r.kernel("c", 200, 10, launch_us=(120, 2))  # step 2
    r.kernel("d", 230, 5, launch_us=(150, 2))  # step 2
    r.kernel("early", 0, 5, launch_us=(-50, 2))  # before any step: in none
    source, steps, lo, hi = windows(tmp_path, r)
    assert source == "cpu_launch"
    assert steps == [1, 2]
    # step 2's window starts where step 1's last activity (b) ends: windows never overlap
    assert lo == [10, 180] and hi == [180, 235]
    run = load_run(tmp_path / "run")
    g = run.ranks[0].gpu
    step_of = dict(zip([run.ranks[0].symbols[i] for i in g.name_id.tolist()], g.step.tolist()))
    # b starts inside step 2's time but was launched in step 1: it belongs to step 1
    assert step_of == {"early": -1, "a": 1, "b": 1, "c": 2, "d": 2}


def test_cpu_steps_win_over_gpu_annotations_that_miss_nested_ranges(tmp_path):
    """Kineto draws the GPU ProfilerStep#N only around kernels launched directly under the step:
    kernels launched inside nested record_function ranges fall outside it. The CPU step holds every
    launch, so every kernel lands in its step."""
    r = RankTrace(0, world_size=1)
    for n, t0 in ((1, 0), (2, 1000)):
        r.cpu_annotation(f"ProfilerStep#{n}", t0, 900)
        r.cpu_annotation("forward", t0 + 10, 500)  # a nested record_function range
        r.cpu_annotation("layer0", t0 + 20, 200)
        r.kernel("direct", t0 + 5, 40, launch_us=(t0 + 2, 2))  # launched directly under the step
        r.gpu_annotation(f"ProfilerStep#{n}", t0 + 5, 40)  # what Kineto draws: this kernel only
        r.kernel("nested_gemm", t0 + 100, 300, launch_us=(t0 + 30, 3))
        r.kernel("nested_add", t0 + 400, 200, launch_us=(t0 + 300, 3))
    source, steps, lo, hi = windows(tmp_path, r)
    assert source == "cpu_launch"
    assert steps == [1, 2] and lo == [0, 595] and hi == [595, 1595]  # µs after the first kernel


def test_no_steps_gives_one_window(tmp_path):
    r = RankTrace(0, world_size=1)
    r.kernel("a", 0, 10)
    r.kernel("b", 30, 20, stream=9)
    source, steps, lo, hi = windows(tmp_path, r)
    assert source == "whole_trace" and steps == [0] and lo == [0] and hi == [50]


def test_no_gpu_activity_gives_no_window(tmp_path):
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", 0, 10)
    source, steps, _, _ = windows(tmp_path, r)
    assert steps == []


def test_a_loop_that_runs_ahead_of_its_gpu_gets_its_period(tmp_path):
    """The CPU launches a step every 20 µs with a prefetch on a side stream; the GPU ends one every
    26 µs. The spans of launched work overlap and grow (33, 39, 45 ... µs); the windows partition
    the timeline and each lasts the period."""
    r = run_ahead_rank(6)
    ticks = raw_gpu_ticks(r.document())
    busy = ticks["compute"] | ticks["comm"] | ticks["memory"]
    source, steps, lo, hi = windows(tmp_path, r)
    first = min(busy)  # the windows() times are after the first activity
    assert source == "cpu_launch" and steps == [1, 2, 3, 4, 5, 6]
    assert all(b >= a for a, b in zip(hi, lo[1:]))  # consecutive windows never overlap
    assert lo[0] == 0 and hi[-1] == max(busy) + 1 - first  # together: the whole timeline
    # the first step from its own first activity (the copy at 3 µs) to its GEMM's end at 36 µs
    assert hi[0] - lo[0] == 36 - 3
    for a, b in zip(lo[1:], hi[1:]):
        assert b - a == pytest.approx(26, rel=0.02)


def test_steps_after_an_unprofiled_gap_start_at_their_own_first_activity(tmp_path):
    """Step numbers 1, 2 then 7, 8 (a second profiling cycle): step 7's window does not reach back
    over the unprofiled steps to step 2's end."""
    r = RankTrace(0, world_size=1)
    for n, t0 in ((1, 0), (2, 100), (7, 1000), (8, 1100)):
        r.cpu_annotation(f"ProfilerStep#{n}", t0, 100)
        r.kernel("gemm", t0 + 10, 50, launch_us=(t0 + 1, 1))
    _, steps, lo, hi = windows(tmp_path, r)
    assert steps == [1, 2, 7, 8]
    assert lo == [0, 50, 1000, 1050] and hi == [50, 150, 1050, 1150]


def test_cpu_run_steps_are_the_profiler_step_ranges_cut_at_their_ends(tmp_path):
    """A gloo all-reduce of step 1 ends 30 µs after `ProfilerStep#2` began: step 1 is still its
    range [0, 100), and the collective's last 30 µs count in step 2 (metrics.md §3)."""
    r = RankTrace(0, world_size=1)
    main, gloo = 100, 200
    r.cpu_annotation("ProfilerStep#1", 0, 100, tid=main)
    r.cpu_annotation("ProfilerStep#2", 100, 100, tid=main)
    comm_us = {}
    for n, t0 in ((1, 0), (2, 100)):
        r.raw(_cpu_op("aten::mm", t0 + 5, 50, main))
        gloo_at, gloo_us = (t0 + 60, 70) if n == 1 else (t0 + 60, 20)
        r.raw(_gloo("gloo:all_reduce", gloo_at, gloo_us, gloo))
        comm_us[n] = (gloo_at, gloo_at + gloo_us)
    run_dir = write_run(tmp_path / "cpu", [r])
    run = load_run(run_dir, workers=1)
    w = run.ranks[0].steps
    base = int(run.ranks[0].gpu.start_ns.min()) - 5 * 1000  # aten::mm of step 1 starts at 5 µs
    assert run.ranks[0].cpu_run
    assert ((w.start_ns - base) / 1000).tolist() == [0, 100]
    assert ((w.end_ns - base) / 1000).tolist() == [100, 200]
    a = analyze_run(run)
    by_step = {s.step: s for s in a.steps}
    assert by_step[1].step_time_us == 100 and by_step[2].step_time_us == 100
    # brute force from the events: each step's share of the union of the gloo ranges
    ticks = set().union(*(set(range(s, e)) for s, e in comm_us.values()))
    for n, (lo, hi) in ((1, (0, 100)), (2, (100, 200))):
        assert by_step[n].comm_us == len({t for t in ticks if lo <= t < hi})
        assert by_step[n].comm_wait_us + by_step[n].comm_transfer_us <= by_step[n].step_time_us
    assert sum(s.comm_us for s in a.steps) == len(ticks)


def _cpu_op(name: str, start: float, dur: float, tid: int) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": start,
        "dur": dur,
        "args": {"Input Dims": [[4, 8], [8, 8]]},
    }


def _gloo(name: str, start: float, dur: float, tid: int) -> dict:
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": start,
        "dur": dur,
        "args": {"Input Dims": [[4, 8]], "Input type": ["float"]},
    }
