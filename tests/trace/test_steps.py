"""Step windows (metrics.md §3): CPU steps through the launch calls' correlation ids first, then
GPU annotations, then one window."""

from tests.kineto import RankTrace, write_run
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
    assert steps == [5, 6] and lo == [0, 50] and hi == [40, 100]


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
    assert lo == [10, 200] and hi == [180, 235]
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
    assert steps == [1, 2] and lo == [0, 1000] and hi == [595, 1595]  # µs after the first kernel


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
