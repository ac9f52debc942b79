"""metrics.md §4 on hand-built traces whose answers are known by hand."""

import pytest

from tests.kineto import Collective, RankTrace, raw_gpu_ticks, run_ahead_rank, write_run
from tpscope.metrics import analyze_run
from tpscope.metrics.breakdown import rank_breakdown, whole_trace_overlap_ratio
from tpscope.trace import load_run

NCCL = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def one_step(tmp_path, build) -> dict:
    """Load a one-rank trace whose step 1 spans [0, 100) µs; return its breakdown as a dict."""
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 100)
    build(r)
    run = load_run(write_run(tmp_path / "run", [r]))
    (step,) = rank_breakdown(run.ranks[0])
    return {k: getattr(step, k) for k in step.__dataclass_fields__}


def test_no_overlap(tmp_path):
    s = one_step(tmp_path, lambda r: (r.kernel("gemm", 0, 40), r.kernel(NCCL, 50, 30, stream=14)))
    assert s["step_time_us"] == 100
    assert s["compute_us"] == 40 and s["comm_us"] == 30
    assert s["hidden_comm_us"] == 0 and s["exposed_comm_us"] == 30
    assert s["idle_us"] == 30
    assert s["exposed_comm_ratio"] == pytest.approx(0.30)
    assert s["overlap_ratio"] == 0 and s["hidden_of_hideable_ratio"] == 0


def test_full_overlap(tmp_path):
    s = one_step(tmp_path, lambda r: (r.kernel("gemm", 0, 80), r.kernel(NCCL, 10, 50, stream=14)))
    assert s["hidden_comm_us"] == 50 and s["exposed_comm_us"] == 0
    assert s["overlap_ratio"] == 1 and s["hidden_of_hideable_ratio"] == 1
    assert s["idle_us"] == 20


def test_partial_overlap(tmp_path):
    # compute [0, 60), comm [40, 100): hidden 20, exposed 40; hideable = min(60, 60)
    s = one_step(tmp_path, lambda r: (r.kernel("gemm", 0, 60), r.kernel(NCCL, 40, 60, stream=14)))
    assert s["hidden_comm_us"] == 20 and s["exposed_comm_us"] == 40
    assert s["overlap_ratio"] == pytest.approx(20 / 60)
    assert s["hidden_of_hideable_ratio"] == pytest.approx(20 / 60)
    assert s["idle_us"] == 0


def test_nested_kernels_and_several_streams(tmp_path):
    def build(r):
        r.kernel("gemm_a", 0, 50, stream=7)
        r.kernel("gemm_b", 10, 20, stream=7)  # nested inside gemm_a (same lane)
        r.kernel("elementwise", 40, 30, stream=21)  # another compute stream: union [0, 70)
        r.kernel(NCCL, 60, 30, stream=14)  # comm [60, 90): hidden [60, 70)

    s = one_step(tmp_path, build)
    assert s["compute_us"] == 70
    assert s["comm_us"] == 30 and s["hidden_comm_us"] == 10 and s["exposed_comm_us"] == 20
    assert s["hidden_of_hideable_ratio"] == pytest.approx(10 / 30)
    assert s["idle_us"] == 10


def test_comm_on_the_compute_stream_is_never_hidden(tmp_path):
    s = one_step(tmp_path, lambda r: (r.kernel("gemm", 0, 40), r.kernel(NCCL, 40, 30, stream=7)))
    assert s["comm_us"] == 30 and s["hidden_comm_us"] == 0 and s["exposed_comm_us"] == 30


def test_peer_copies_are_communication_other_copies_memory(tmp_path):
    def build(r):
        r.kernel("gemm", 0, 50)
        r.memcpy("Memcpy PtoP (Device -> Device)", 20, 40, stream=14)  # comm [20, 60)
        r.memcpy("Memcpy HtoD (Pinned -> Device)", 70, 10, stream=15)  # memory
        r.memset(85, 5, stream=15)  # memory

    s = one_step(tmp_path, build)
    assert s["comm_us"] == 40 and s["hidden_comm_us"] == 30
    assert s["memory_us"] == 15
    assert s["idle_us"] == 100 - 60 - 15


def test_filler_kernels_count_as_idle(tmp_path):
    def build(r):
        r.kernel("void at::cuda::(anonymous namespace)::spin_kernel(long)", 0, 50)
        r.kernel(NCCL, 10, 20, stream=14)

    s = one_step(tmp_path, build)
    assert s["compute_us"] == 0
    assert s["comm_us"] == 20 and s["exposed_comm_us"] == 20
    assert s["idle_us"] == 80
    assert s["hidden_of_hideable_ratio"] is None  # nothing to hide behind


def test_activity_outside_the_window_is_clipped(tmp_path):
    s = one_step(tmp_path, lambda r: (r.kernel("gemm", -20, 40), r.kernel(NCCL, 90, 30, stream=14)))
    assert s["compute_us"] == 20 and s["comm_us"] == 10


def test_no_comm_gives_null_ratios(tmp_path):
    s = one_step(tmp_path, lambda r: r.kernel("gemm", 0, 40))
    assert s["overlap_ratio"] is None and s["hidden_of_hideable_ratio"] is None
    assert s["exposed_comm_ratio"] == 0


def test_whole_trace_overlap_ignores_steps(tmp_path):
    r = RankTrace(0, world_size=1)
    r.kernel("gemm", 0, 100)
    r.kernel(NCCL, 50, 100, stream=14)
    run = load_run(write_run(tmp_path / "run", [r]))
    assert whole_trace_overlap_ratio(run.ranks[0]) == pytest.approx(0.5)


def test_host_staged_copies_count_as_communication(tmp_path):
    # compute [0, 60); a device -> host copy [40, 80) inside a stage_out range and a host -> device
    # copy [85, 95) inside a stage_in range (metrics.md §2): communication 50 µs, hidden 20, exposed 30.
    def build(r):
        r.kernel("gemm", 0, 60, launch_us=(0, 1))
        r.cpu_annotation("tpscope/fc2/gemm_rs/stage_out", 20, 10)
        r.memcpy("Memcpy DtoH (Device -> Pinned)", 40, 40, stream=20, launch_us=(25, 1))
        r.cpu_annotation("tpscope/fc2/gemm_rs/stage_in", 70, 10)
        r.memcpy("Memcpy HtoD (Pinned -> Device)", 85, 10, stream=21, launch_us=(75, 1))

    s = one_step(tmp_path, build)
    assert s["comm_us"] == 50 and s["hidden_comm_us"] == 20 and s["exposed_comm_us"] == 30


def test_a_run_ahead_loop_counts_every_interval_once(tmp_path):
    """A loop that runs ahead of its GPU (a prefetch on a side stream): each per-step field summed
    over the steps equals the same quantity over the whole trace, by brute force over the raw
    events' µs ticks; the steady steps are the GPU's period, all GEMM (metrics.md §3-§4)."""
    r = run_ahead_rank(6)
    t = raw_gpu_ticks(r.document())
    busy = t["compute"] | t["comm"] | t["memory"]
    a = analyze_run(load_run(write_run(tmp_path / "run", [r])))
    steps = sorted(a.steps, key=lambda s: s.step)

    def total(field):
        return sum(getattr(s, field) for s in steps)

    assert total("step_time_us") == max(busy) + 1 - min(busy)
    assert total("compute_us") == len(t["compute"])
    assert total("comm_us") == len(t["comm"])
    assert total("memory_us") == len(t["memory"])
    assert total("hidden_comm_us") == len(t["comm"] & t["compute"])
    assert total("idle_us") == (max(busy) + 1 - min(busy)) - len(busy)
    assert total("comm_wait_us") + total("comm_transfer_us") == len(t["comm"])
    for s in steps[1:]:
        assert s.step_time_us == 26 and s.compute_us == 26 and s.idle_us == 0


def test_a_wait_never_exceeds_its_step(tmp_path):
    """Rank 0 reaches two collectives (two comm streams) 40 µs before rank 1 in a 60 µs step: both
    kernels wait [10, 50) and transfer [50, 60). Summed per kernel the wait would be 80 µs; as
    time it is 40, and wait + transfer is the rank's communication time (metrics.md §5)."""
    ranks = []
    for rank, arrive in ((0, 10), (1, 50)):
        r = RankTrace(rank)
        r.gpu_annotation("ProfilerStep#1", 0, 60)
        r.kernel("gemm", 0, arrive)
        r.kernel(NCCL, arrive, 60 - arrive, stream=14, collective=Collective("_allgather_base"))
        r.kernel(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            arrive,
            60 - arrive,
            stream=15,
            collective=Collective("allreduce", in_nelems=1024, out_nelems=1024),
        )
        ranks.append(r)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    s0, s1 = sorted(a.steps, key=lambda s: s.rank)
    assert s0.step_time_us == 60 and s0.comm_us == 50
    assert s0.comm_wait_us == 40 and s0.comm_transfer_us == 10
    assert s1.comm_wait_us == 0 and s1.comm_transfer_us == 10
