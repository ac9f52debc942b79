"""metrics.md §11: the replay on hand-built traces whose replayed times are known by hand, and the
identity on every sample run, corpus job and CPU job against the analyzer's own step spans (§7)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.metrics.whatif import predict, prepare
from tpscope.metrics.whatif_changes import parse_change
from tpscope.trace import load_run

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
SAMPLES = sorted((REPO / "sample_traces").glob("h200x2-*"))
CORPUS = [
    DATA / "real" / "param-dlrm-torchrec-v100x8",
    DATA / "real" / "tracelens-b200-eager-rank0of8",
    DATA / "real" / "tracelens-qwen05b-h100",
    DATA / "real" / "tracelens-qwen05b-mi300",
    DATA / "h200-nvlink-unfused",
    DATA / "h200-shm-chunked4",
    DATA / "hta" / "nccl_parser_config",
    DATA / "hta" / "critical_path" / "alexnet",
    DATA / "hta" / "critical_path" / "simple_add",
]
CPU_JOBS = sorted(p for p in (DATA / "foreign-cpu").iterdir() if p.is_dir())
AG = Collective("_allgather_base", in_nelems=1024, out_nelems=2048, group_size=2)


def _two_ranks() -> list[RankTrace]:
    """Rank 0: `a` [0, 100], the all-gather [100, 300], `b` [300, 400]; rank 1: `a` [0, 150], the
    all-gather [150, 300], `b` [300, 400]; every kernel launched long before (the GPU binds).
    The all-gather's arrival is 150: each rank's transfer is 150 µs (§5)."""
    ranks = []
    for rank, a_us in ((0, 100), (1, 150)):
        r = RankTrace(rank)
        r.cpu_annotation("ProfilerStep#1", -60, 600)
        r.kernel("a", 0, a_us, launch_us=(-50, 1))
        r.kernel("ncclDevKernel_AllGather", a_us, 300 - a_us, launch_us=(-40, 1), collective=AG)
        r.kernel("b", 300, 100, launch_us=(-30, 1))
        ranks.append(r)
    return ranks


@pytest.mark.parametrize(
    "change, step_us",
    [
        ("comm=0.5", 150 + 75 + 100),  # transfer 150 -> 75 after the arrival at 150
        ("hide=all", 150 + 100),
        ("comm=2@all_gather", 150 + 300 + 100),
        # 4,096 bytes gathered, busbw factor 1/2: 10 µs + 2,048 B / 2.048 GB/s = 11 µs
        ("link=2.048,10", 150 + 11 + 100),
    ],
)
def test_changes_on_a_hand_built_collective(tmp_path, change, step_us):
    inp = prepare(load_run(write_run(tmp_path / "run", _two_ranks())))
    w = predict(inp, [parse_change(change)])
    assert w.measured_steps_us == pytest.approx([400])
    assert w.replayed_steps_us == pytest.approx([400])
    assert w.changes[0].step_us == pytest.approx([step_us])


def test_cpu_bound_launch_moves_with_the_host(tmp_path):
    """One rank: `a` [0, 10] launched at (-5, 1); the CPU waits in cudaDeviceSynchronize [0, 12]
    (returns 2 µs after `a`), spends 100 µs, launches `b` at (112, 3) which runs [116, 126].
    comm=0.5 changes nothing here (no comm); the replay keeps the host gap and the latencies."""
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -10, 200)
    r.kernel("a", 0, 10, launch_us=(-5, 1))
    r.raw(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaDeviceSynchronize",
            "pid": 100,
            "tid": 100,
            "ts": 0,
            "dur": 12,
            "args": {"correlation": 999_001},
        }
    )
    r.kernel("b", 116, 10, launch_us=(112, 3))
    inp = prepare(load_run(write_run(tmp_path / "run", [r])))
    w = predict(inp, [])
    assert w.replayed_steps_us == pytest.approx([126])
    assert w.inferred_us_per_step == {"held": 0.0, "unexplained": 0.0}


def _spans(run_dir: Path) -> dict[int, float]:
    """The analyzer's measured step spans (§7's span_us: latest end minus earliest start)."""
    return {p.step: p.span_us for p in analyze_run(load_run(run_dir, workers=1)).critical_path}


@pytest.mark.parametrize("run_dir", SAMPLES + CORPUS + CPU_JOBS, ids=lambda p: p.name)
def test_identity_within_one_percent(run_dir):
    """Replaying the unchanged graph gives each step's measured span within 1%."""
    inp = prepare(load_run(run_dir, workers=1))
    t0 = time.perf_counter()
    w = predict(inp, [])
    elapsed = time.perf_counter() - t0
    spans = _spans(run_dir)
    for step, replayed in zip(w.steps, w.replayed_steps_us):
        assert replayed == pytest.approx(spans[step], rel=0.01), step
    assert w.out_of_order == 0
    assert elapsed < 5.0  # tens of thousands of activities replay in well under a second


def test_identity_names_what_an_incomplete_graph_carries(tmp_path):
    """Two kernels on one stream, no launch calls in the trace, 500 µs apart with nothing on
    another stream: no edge explains the gap. The replay does not keep it (the identity misses by
    490 µs: the gap less the 10 µs an edge may carry) and says how much time it carried."""
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -10, 1000)
    r.kernel("a", 0, 100)
    r.kernel("b", 600, 100)
    w = predict(prepare(load_run(write_run(tmp_path / "run", [r]))), [])
    assert w.measured_steps_us == pytest.approx([700])
    assert w.replayed_steps_us == pytest.approx([210])
    assert w.inferred_us_per_step["unexplained"] == pytest.approx(490)
