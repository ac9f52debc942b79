"""A CPU run (no GPU activity) analyzed from its CPU side: gloo collectives and blocking waits as
communication, the self time of CPU ops as compute, CPU threads as lanes (metrics.md §1, "CPU
runs")."""

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
    """One step: a matmul of 100 + late µs (an mm of 80 + late µs inside it, 10 µs of its own on
    each side), the all-reduce's issue call, then gloo's all-reduce of 4 x 8 floats on the worker
    thread until t=300 on both ranks; a copy inside the all-reduce belongs to it. Rank 0's
    training thread blocks in a `wait_tensor` from 200 to 300 (a copy inside it, from 290)."""
    r = RankTrace(rank)
    r.cpu_annotation("ProfilerStep#1", 0, 400, tid=MAIN)
    _op(r, "aten::matmul", 0, 100 + late_us)
    _op(r, "aten::mm", 10, 80 + late_us, **{"Input Dims": [[4, 8], [8, 8]]})
    _op(r, "c10d::allreduce_", 100 + late_us, 5)
    _gloo(r, "gloo:all_reduce", 105 + late_us, 195 - late_us, [[4, 8]])
    _op(r, "aten::copy_", 110 + late_us, 10, tid=GLOO)
    if rank == 0:
        _op(r, "_c10d_functional::wait_tensor", 200, 100)
        _op(r, "aten::copy_", 290, 5)
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
    # self time: the matmul's own 10 + 10 µs around the mm, the mm; the issue call is neither;
    # nothing inside the collective; the wait is communication, the copy inside it compute
    assert names == [
        "aten::matmul",
        "aten::mm",
        "aten::matmul",
        "gloo:all_reduce",
        "_c10d_functional::wait_tensor",
        "aten::copy_",
        "aten::add",
    ]
    C, M = ActivityClass.COMPUTE, ActivityClass.COMM
    assert r0.gpu.cls.tolist() == [C, C, C, M, M, C, C]
    t0 = int(r0.gpu.start_ns[0])
    assert list(zip((r0.gpu.start_ns - t0).tolist(), (r0.gpu.end_ns - t0).tolist())) == [
        (0, 10_000),
        (10_000, 90_000),
        (90_000, 100_000),
        (105_000, 300_000),
        (200_000, 300_000),
        (290_000, 295_000),
        (310_000, 330_000),
    ]
    assert [r0.lane_label(k) for k in r0.gpu.lane] == [
        f"rank 0 cpu thread {t}" for t in (100, 100, 100, 200, 100, 100, 100)
    ]
    comm = 3
    assert r0.gpu.in_nelems[comm] == 32 and r0.gpu.out_nelems[comm] == 32
    assert sym[r0.gpu.dtype_id[comm]] == "float" and r0.gpu.group_size[comm] == 2
    assert r0.gpu.step.tolist() == [1] * 7 and r0.steps.step.tolist() == [1]


def test_metrics_of_a_cpu_run(cpu_run_dir):
    """By hand: rank 0 computes 100 + 5 + 20 µs (the copy inside its wait hides 5 µs of it) and
    communicates 195 µs; the all-reduce waits 40 µs for rank 1 and then moves data for 155 µs on
    both; rank 0's blocking wait (200-300) is communication, all of it wait, but it lies under the
    all-reduce's transfer (145-300): per step, time is counted once (metrics.md §5), so the step's
    wait is the all-reduce's 40 µs and wait + transfer is the communication."""
    analysis = analyze_run(load_run(cpu_run_dir, workers=1))
    assert analysis.cpu_run
    s0 = next(s for s in analysis.steps if s.rank == 0)
    assert s0.compute_us == pytest.approx(125.0)
    assert s0.comm_us == pytest.approx(195.0) and s0.exposed_comm_us == pytest.approx(190.0)
    assert s0.comm_wait_us == pytest.approx(40.0)
    assert s0.comm_transfer_us == pytest.approx(155.0)
    assert s0.comm_wait_us + s0.comm_transfer_us == pytest.approx(s0.comm_us)
    (inst,) = analysis.collectives
    assert inst.ranks == [0, 1]
    assert inst.wait_us == pytest.approx(40.0)
    assert inst.bytes == 32 * 4
    # The critical path, by hand (metrics.md §7): rank 1's matmul (0-140: its own 10 µs, the mm
    # 10-130, its own 10 µs; compute 140), the c10d issue call (5 µs), host on its main thread,
    # which the all-reduce waited for (`thread`); the all-reduce's transfer once both arrived
    # (145-300, comm 155); rank 0's main thread waking up after it (10 µs host, `thread`), the add
    # (310-330, compute 20).
    (path,) = analysis.critical_path
    assert path.length_us == pytest.approx(330.0)
    assert (path.compute_us, path.comm_us, path.idle_us, path.host_us) == pytest.approx(
        (160.0, 155.0, 0.0, 15.0)
    )
    assert [(s["kind"], s["name"], s["rank"]) for s in path.segments] == [
        ("compute", "aten::matmul", 1),
        ("compute", "aten::mm", 1),
        ("compute", "aten::matmul", 1),
        ("host", "c10d::allreduce_", 1),
        ("comm", "gloo:all_reduce", 0),
        ("host", "aten::add", 0),
        ("compute", "aten::add", 0),
    ]


def test_a_gloo_collective_is_the_kind_its_issuing_op_names(tmp_path):
    """gloo runs a reduce-scatter as an all-reduce: the `c10d::` op that issued it names it, and
    gives its output (its first tensor: 2 x 8 of the 4 x 8 input)."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.cpu_annotation("ProfilerStep#1", 0, 400, tid=MAIN)
        dims = [[[2, 8]], [[4, 8]], [], [], [], []]
        _op(r, "c10d::reduce_scatter_tensor_coalesced_", 10, 5, **{"Input Dims": dims})
        _gloo(r, "gloo:all_reduce", 20, 100, [[4, 8]])
        _op(r, "c10d::allreduce_", 150, 5, **{"Input Dims": [[[4, 8]], [], [], [], [], []]})
        _gloo(r, "gloo:all_reduce", 160, 100, [[4, 8]])
        ranks.append(r)
    run = load_run(write_run(tmp_path / "rs", ranks), workers=1)
    g = run.ranks[0].gpu
    sym = run.ranks[0].symbols
    assert [sym[c] for c in g.coll_name_id] == ["gloo:reduce_scatter", "gloo:all_reduce"]
    assert g.in_nelems.tolist() == [32, 32] and g.out_nelems.tolist() == [16, 32]
    analysis = analyze_run(run)
    assert sorted(c.collective for c in analysis.collectives) == [
        "gloo:all_reduce",
        "gloo:reduce_scatter",
    ]
    rs = next(c for c in analysis.collectives if c.collective == "gloo:reduce_scatter")
    assert rs.bytes == 32 * 4  # metrics.md §5: a reduce-scatter's bytes are its input's


def test_a_gpu_rank_is_not_a_cpu_run():
    from pathlib import Path

    run = load_run(Path(__file__).resolve().parents[1] / "data" / "h200-nvlink-unfused", workers=1)
    assert not any(r.cpu_run for r in run.ranks)
    assert all(r.lane_label(0).startswith(f"rank {r.rank} gpu ") for r in run.ranks)
