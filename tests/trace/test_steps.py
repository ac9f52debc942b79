"""Step windows (metrics.md §3): GPU annotations, CPU annotations through correlation ids, none."""

from tests.kineto import RankTrace, write_run
from tpscope.trace import load_run


def windows(tmp_path, r: RankTrace):
    run = load_run(write_run(tmp_path / "run", [r]))
    w = run.ranks[0].steps
    base = run.ranks[0].gpu.start_ns.min() if len(run.ranks[0].gpu) else 0
    return w.source, w.step.tolist(), ((w.start_ns - base) / 1000).tolist(), ((w.end_ns - base) / 1000).tolist()


def test_steps_from_gpu_annotations(tmp_path):
    r = RankTrace(0, world_size=1)
    r.kernel("gemm", 0, 10)
    r.gpu_annotation("ProfilerStep#5", 0, 40)
    r.gpu_annotation("ProfilerStep#6", 50, 30)
    r.gpu_annotation("ProfilerStep#6", 60, 40)  # a second lane: the window is the min..max
    r.cpu_annotation("ProfilerStep#5", -100, 10)  # ignored: GPU annotations win
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
    assert source == "cpu_annotation"
    assert steps == [1, 2]
    assert lo == [10, 200] and hi == [180, 235]


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
