"""metrics.md §5: collective matching, wait versus transfer, skew, bytes and bus bandwidth."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.metrics.collectives import (
    busbw_factor,
    collective_kind,
    collective_timing,
    match_collectives,
    run_activities,
)
from tpscope.trace import load_run

AG = Collective("_allgather_base", in_nelems=1024, out_nelems=2048, dtype="BFloat16", group_size=2)
AG_OTHER = Collective("_allgather_base", in_nelems=512, out_nelems=1024, dtype="BFloat16", group_size=2)
RS = Collective("_reduce_scatter_base", in_nelems=2048, out_nelems=1024, dtype="BFloat16", group_size=2)


def _by(analysis, rank, step=0):
    return next(s for s in analysis.steps if s.rank == rank and s.step == step)


def test_late_rank_makes_the_early_one_wait(tmp_path):
    """Rank 1 enters X = 30 µs late: rank 0 waits 30, moves bytes 20; the skew is 30."""
    r0, r1 = RankTrace(0), RankTrace(1)
    r0.kernel("gemm", 0, 100)
    r0.kernel("ncclDevKernel_AllGather_RING_LL", 100, 50, stream=14, collective=AG)
    r1.kernel("gemm", 0, 130)
    r1.kernel("ncclDevKernel_AllGather_RING_LL", 130, 20, stream=14, collective=AG)
    a = analyze_run(load_run(write_run(tmp_path / "run", [r0, r1])))
    assert _by(a, 0).comm_wait_us == pytest.approx(30.0)
    assert _by(a, 0).comm_transfer_us == pytest.approx(20.0)
    assert _by(a, 1).comm_wait_us == pytest.approx(0.0)
    assert _by(a, 1).comm_transfer_us == pytest.approx(20.0)
    (c,) = a.collectives
    assert c.skew_us == pytest.approx(30.0) and c.wait_us == pytest.approx(30.0)
    assert c.transfer_us == pytest.approx(20.0)
    assert c.ranks == [0, 1] and c.collective == "_allgather_base"
    # all-gather bytes: Out msg nelems x 2 bytes (bf16); algbw = bytes / 20 µs; busbw = algbw x (n-1)/n
    assert c.bytes == 2048 * 2
    assert c.busbw_gbps == pytest.approx(4096 / 20_000 * 0.5)
    assert a.warnings == []


def test_busbw_factors_are_nccl_tests():
    assert busbw_factor(collective_kind("_allgather_base"), 8) == pytest.approx(7 / 8)
    assert busbw_factor(collective_kind("reduce_scatter_tensor"), 4) == pytest.approx(3 / 4)
    assert busbw_factor(collective_kind("allreduce"), 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor(collective_kind("broadcast"), 8) == pytest.approx(1.0)
    assert collective_kind("all_gather_into_tensor") == "all_gather"
    assert collective_kind("barrier") is None


def test_mismatched_collective_is_a_warning_and_the_rest_still_match(tmp_path):
    r0, r1 = RankTrace(0), RankTrace(1)
    r0.kernel("ncclDevKernel_AllGather", 0, 50, stream=14, collective=AG)
    r1.kernel("ncclDevKernel_AllGather", 10, 40, stream=14, collective=AG)
    r0.kernel("ncclDevKernel_AllGather", 100, 50, stream=14, collective=AG)
    r1.kernel("ncclDevKernel_AllGather", 100, 50, stream=14, collective=AG_OTHER)  # other counts
    r0.kernel("ncclDevKernel_ReduceScatter", 200, 50, stream=14, collective=RS)
    r1.kernel("ncclDevKernel_ReduceScatter", 205, 45, stream=14, collective=RS)
    a = analyze_run(load_run(write_run(tmp_path / "run", [r0, r1])))
    assert any("do not match across ranks" in w and "In msg nelems" in w for w in a.warnings)
    assert [(c.collective, c.skew_us) for c in a.collectives] == [
        ("_allgather_base", pytest.approx(10.0)), ("_reduce_scatter_base", pytest.approx(5.0))]
    # the unmatched kernels are all transfer: rank 0 waits 10 + 5 µs in the two matched ones
    assert _by(a, 0).comm_wait_us == pytest.approx(15.0)
    assert _by(a, 0).comm_transfer_us == pytest.approx(50 + 50 + 50 - 15)


def test_copy_engine_transfers_and_barriers_split_into_transfer_and_wait(tmp_path):
    """A copy-engine step (tpscope's copy_engine mode, torch's async TP): peer copies move the
    data (all transfer); the symmetric-memory barriers only wait for the other rank (all wait)."""
    barrier = "c10d::symmetric_memory::barrier_kernel(unsigned int**, int, int, int, unsigned long)"
    r0, r1 = RankTrace(0), RankTrace(1)
    for r, late in ((r0, 0.0), (r1, 25.0)):
        r.kernel("gemm", 0, 200)
        r.kernel(barrier, 10, 4 + (25.0 - late), stream=18)  # rank 0 spins until rank 1 arrives
        r.memcpy("Memcpy PtoP (Device -> Device)", 40, 90, stream=18)
        r.memcpy("Memcpy DtoD (Device -> Device)", 140, 30, stream=18)  # a local staging copy
        r.kernel(barrier, 175, 3, stream=18)
    a = analyze_run(load_run(write_run(tmp_path / "run", [r0, r1])))
    assert _by(a, 0).comm_wait_us == pytest.approx(4 + 25 + 3)
    assert _by(a, 0).comm_transfer_us == pytest.approx(90.0)
    assert _by(a, 1).comm_wait_us == pytest.approx(4 + 3)
    assert _by(a, 1).comm_transfer_us == pytest.approx(90.0)
    # the barriers and the peer copy are communication; the staging copy is memory (§2)
    assert _by(a, 0).comm_us == pytest.approx(29 + 90 + 3)
    assert a.collectives == []  # no NCCL metadata: nothing to match across ranks


def test_seq_keys_match_when_a_rank_lacks_a_collective(tmp_path):
    """With Seq on every kernel, instances match by (pg, Seq), not by position."""
    r0, r1 = RankTrace(0), RankTrace(1)

    def ag(seq):
        return Collective("_allgather_base", seq=seq, on_kernel=True)

    r0.kernel("ncclDevKernel_AllGather", 0, 50, stream=14, collective=ag(5))
    r0.kernel("ncclDevKernel_AllGather", 100, 50, stream=14, collective=ag(6))
    r1.kernel("ncclDevKernel_AllGather", 120, 30, stream=14, collective=ag(6))
    a = analyze_run(load_run(write_run(tmp_path / "run", [r0, r1])))
    (c,) = a.collectives
    assert c.key.endswith("#6") and c.skew_us == pytest.approx(20.0)
    assert any("no counterpart" in w for w in a.warnings)


def test_wait_and_transfer_agree_with_a_brute_force_reference(tmp_path):
    """Random 3-rank traces; the expected wait per kernel is computed by a plain loop."""
    rng = np.random.default_rng(7)
    n_ranks, n_coll = 3, 6
    starts = rng.uniform(0, 30, (n_ranks, n_coll)) + np.arange(n_coll) * 100
    ends = starts.max(axis=0) + rng.uniform(5, 40, (n_ranks, n_coll))
    starts, ends = np.round(starts, 3), np.round(ends, 3)
    ranks = [RankTrace(r, world_size=n_ranks) for r in range(n_ranks)]
    for r, t in enumerate(ranks):
        for k in range(n_coll):
            coll = AG if k % 2 == 0 else RS
            t.kernel("ncclDevKernel_X", float(starts[r, k]), float(ends[r, k] - starts[r, k]), stream=14,
                     collective=Collective(coll.name, coll.in_nelems, coll.out_nelems, group_size=n_ranks))
    run = load_run(write_run(tmp_path / "run", ranks))
    acts = run_activities(run)
    match = match_collectives(acts)
    timing = collective_timing(acts, match, np.zeros(n_ranks, np.int64))
    assert match.n_instances == n_coll
    for r in range(n_ranks):
        for k in range(n_coll):
            arrival = starts[:, k].max()
            expected_wait = max(0.0, min(ends[r, k], arrival) - starts[r, k])
            row = _row_of(acts, r, k)  # each rank's collectives are in time order
            assert timing.wait_ns[row] / 1000 == pytest.approx(expected_wait, abs=0.002)
            assert (timing.wait_ns[row] + timing.transfer_ns[row]) / 1000 == pytest.approx(
                ends[r, k] - starts[r, k], abs=0.002)


def _row_of(acts, rank, k):
    rows = np.flatnonzero(acts.rank == rank)
    return rows[np.argsort(acts.start_ns[rows])][k]


def test_json_fields_of_design_md(tmp_path):
    """DESIGN.md's `tpscope analyze --json` fields for §5-§9 are present and plain JSON."""
    import json

    from tpscope.metrics import as_json

    r0, r1 = RankTrace(0), RankTrace(1)
    for r, late in ((r0, 0), (r1, 5)):
        r.kernel("gemm", 0, 100 + late)
        r.kernel("ncclDevKernel_AllGather", 100 + late, 50 - late, collective=AG)
    doc = json.loads(json.dumps(as_json(analyze_run(load_run(write_run(tmp_path / "run", [r0, r1]))))))
    assert {"step", "key", "collective", "bytes", "ranks", "skew_us", "transfer_us", "busbw_gbps"} <= set(
        doc["collectives"][0])
    assert {"step", "length_us", "compute_us", "comm_us", "memory_us", "host_us", "idle_us",
            "exposed_comm_ratio", "ranks"} <= set(doc["critical_path"][0])
    assert {"comm_wait_us", "comm_transfer_us", "contention_tax_us", "contention_slowdown"} <= set(doc["steps"][0])
    assert {"critical_path_exposed_comm_ratio", "contention_slowdown"} <= set(doc["summary"])
    assert doc["clock_offsets_us"] == {"0": 0.0, "1": 0.0}
    assert doc["steps"][0]["contention_tax_us"] is None  # unknown, not a made-up 0


def test_one_rank_alone_gets_its_collectives(tmp_path):
    """A single rank's trace: each collective is an instance of its own, no wait, all transfer."""
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 500)
    r.kernel("gemm", 0, 100)
    for k, (start, dur) in enumerate(((100, 60), (300, 90))):
        r.kernel("ncclDevKernel_AllReduce", start, dur, stream=14,
                 collective=Collective("allreduce", in_nelems=256, out_nelems=256, dtype="Float", seq=k,
                                       group_size=1, on_kernel=True))
    analysis = analyze_run(load_run(write_run(tmp_path / "one", [r]), workers=1))
    assert [(c.transfer_us, c.wait_us, c.ranks) for c in analysis.collectives] == [(60.0, 0.0, [0]), (90.0, 0.0, [0])]
