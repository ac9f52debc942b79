"""A CPU run (no GPU activity) analyzed from its CPU side: gloo collectives as communication,
innermost aten ops as compute, CPU threads as lanes (metrics.md §1, "CPU runs")."""

from __future__ import annotations

import pytest

from tests.kineto import RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.trace import ActivityClass, load_run

MAIN, GLOO = 100, 200  # the training thread and gloo's worker thread


def _op(r: RankTrace, name: str, start: float, dur: float, tid: int = MAIN, **args) -> None:
    r.raw(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 1,
            "tid": tid,
            "ts": start,
            "dur": dur,
            "args": {"External id": len(r.events) + 1, **args},
        }
    )


def _gloo(
    r: RankTrace, name: str, start: float, dur: float, dims: list, dtype: str = "float"
) -> None:
    r.raw(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": name,
            "pid": 1,
            "tid": GLOO,
            "ts": start,
            "dur": dur,
            "args": {"Input Dims": dims, "Input type": [dtype]},
        }
    )


def cpu_rank(rank: int, late_us: float) -> RankTrace:
    """One step: a matmul (an mm inside it) of 80 + late µs, the all-reduce's issue call, then
    gloo's all-reduce of 4 x 8 floats on the worker thread until t=300 on both ranks; a copy
    inside the all-reduce belongs to it."""
    r = RankTrace(rank)
    r.cpu_annotation("ProfilerStep#1", 0, 400, tid=MAIN)
    _op(r, "aten::matmul", 0, 100 + late_us)
    _op(r, "aten::mm", 10, 80 + late_us, **{"Input Dims": [[4, 8], [8, 8]]})
    _op(r, "c10d::allreduce_", 100 + late_us, 5)
    _gloo(r, "gloo:all_reduce", 105 + late_us, 195 - late_us, [[4, 8]])
    _op(r, "aten::copy_", 110 + late_us, 10, tid=GLOO)
    _op(r, "aten::add", 310, 20)  # after the all-reduce: compute again
    return r


@pytest.fixture()
def cpu_run_dir(tmp_path):
    return write_run(tmp_path / "cpu", [cpu_rank(0, 0.0), cpu_rank(1, 40.0)])


def test_activities_of_a_cpu_rank(cpu_run_dir):
    run = load_run(cpu_run_dir, workers=1)
    r0 = run.ranks[0]
    assert r0.cpu_run and not run.warnings
    sym = r0.symbols
    names = [sym[i] for i in r0.gpu.name_id]
    # innermost ops only (mm, not matmul), no issue call, nothing inside the collective
    assert names == ["aten::mm", "gloo:all_reduce", "aten::add"]
    assert r0.gpu.cls.tolist() == [ActivityClass.COMPUTE, ActivityClass.COMM, ActivityClass.COMPUTE]
    assert [r0.lane_label(k) for k in r0.gpu.lane] == [
        "rank 0 cpu thread 100",
        "rank 0 cpu thread 200",
        "rank 0 cpu thread 100",
    ]
    comm = 1
    assert r0.gpu.in_nelems[comm] == 32 and r0.gpu.out_nelems[comm] == 32
    assert sym[r0.gpu.dtype_id[comm]] == "float" and r0.gpu.group_size[comm] == 2
    assert r0.gpu.step.tolist() == [1, 1, 1] and r0.steps.step.tolist() == [1]


def test_metrics_of_a_cpu_run(cpu_run_dir):
    """By hand: rank 0 computes 80 + 20 µs and communicates 195 µs with nothing beside it; the
    all-reduce waits 40 µs for rank 1 and then moves data for 155 µs on both."""
    analysis = analyze_run(load_run(cpu_run_dir, workers=1))
    assert analysis.cpu_run
    s0 = next(s for s in analysis.steps if s.rank == 0)
    assert s0.compute_us == pytest.approx(100.0)
    assert s0.comm_us == pytest.approx(195.0) and s0.exposed_comm_us == pytest.approx(195.0)
    (inst,) = analysis.collectives
    assert inst.ranks == [0, 1]
    assert inst.wait_us == pytest.approx(40.0)
    assert inst.bytes == 32 * 4
    # The critical path, by hand (metrics.md §7): rank 1's mm (10-130, compute 120), the rest of
    # its matmul (10 µs) and the c10d issue call (5 µs), host on its main thread, which the
    # all-reduce waited for (`thread`); the all-reduce's transfer once both arrived (145-300, comm
    # 155); rank 0's main thread waking up after it (10 µs host, `thread`), the add (310-330).
    (path,) = analysis.critical_path
    assert path.length_us == pytest.approx(320.0)
    assert (path.compute_us, path.comm_us, path.idle_us, path.host_us) == pytest.approx(
        (140.0, 155.0, 0.0, 25.0)
    )
    assert [(s["kind"], s["name"], s["rank"]) for s in path.segments] == [
        ("compute", "aten::mm", 1),
        ("host", "aten::matmul", 1),
        ("host", "c10d::allreduce_", 1),
        ("comm", "gloo:all_reduce", 0),
        ("host", "aten::add", 0),
        ("compute", "aten::add", 0),
    ]


def test_a_gpu_rank_is_not_a_cpu_run():
    from pathlib import Path

    run = load_run(Path(__file__).resolve().parents[1] / "data" / "h200-nvlink-unfused", workers=1)
    assert not any(r.cpu_run for r in run.ranks)
    assert all(r.lane_label(0).startswith(f"rank {r.rank} gpu ") for r in run.ranks)
