"""The run-wide activity table: every rank's GPU activities in one table with run-wide ids."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kineto import BASE_NS, Collective, RankTrace, write_run
from tpscope.metrics import intervals as iv
from tpscope.metrics.activities import aligned, exposed_ns, run_activities
from tpscope.trace import load_run

AG = Collective(
    "_allgather_base", in_nelems=1024, out_nelems=2048, dtype="BFloat16", pg="7", on_kernel=True
)


def _two_ranks(tmp_path):
    """Rank 0: gemm, ag on a side stream; rank 1: relu, gemm, ag (rank 1's kernels in another order)."""
    r0, r1 = RankTrace(0), RankTrace(1)
    r0.kernel("gemm", 0, 100)
    r0.kernel("ncclDevKernel_AllGather", 40, 50, stream=14, collective=AG)
    r1.kernel("relu", 0, 10)
    r1.kernel("gemm", 10, 80)
    r1.kernel("ncclDevKernel_AllGather", 95, 20, stream=14, collective=AG)
    return load_run(write_run(tmp_path / "run", [r0, r1]))


def test_ranks_are_contiguous_and_strings_are_run_wide(tmp_path):
    acts = run_activities(_two_ranks(tmp_path))
    assert acts.rank.tolist() == [0, 0, 1, 1, 1]
    assert acts.rank_bounds.tolist() == [0, 2, 5]
    names = [acts.strings[i] for i in acts.name.tolist()]
    assert names == ["gemm", "ncclDevKernel_AllGather", "relu", "gemm", "ncclDevKernel_AllGather"]
    assert acts.name[0] == acts.name[3]  # one id for one name, whichever rank it came from
    assert [acts.strings[i] for i in acts.coll[[1, 4]].tolist()] == ["_allgather_base"] * 2
    assert (acts.coll[[0, 2, 3]] == -1).all()
    # times are each rank's own clock, in ns
    assert (acts.start_ns - BASE_NS).tolist() == [0, 40_000, 0, 10_000, 95_000]
    assert (acts.end_ns - acts.start_ns).tolist() == [100_000, 50_000, 10_000, 80_000, 20_000]


def test_lanes_are_run_wide(tmp_path):
    acts = run_activities(_two_ranks(tmp_path))
    # two streams on each rank: four lanes, none shared between the ranks
    assert len(acts.lane_labels) == 4
    assert set(acts.lane[:2].tolist()).isdisjoint(acts.lane[2:].tolist())
    assert acts.lane[1] != acts.lane[0] and acts.lane[4] != acts.lane[3]
    assert acts.lane[0] != acts.lane[3]  # rank 0's and rank 1's compute streams: two lanes


def test_group_label_is_name_and_ranks(tmp_path):
    """The kernels name group "7" but not its ranks: pg_config lists them (metrics.md §5)."""
    ranks = [RankTrace(r, pg_config=[{"pg_name": "7", "ranks": [0, 1]}]) for r in (0, 1)]
    for r in ranks:
        r.kernel("ncclDevKernel_AllGather", 0, 10, stream=14, collective=AG)
    acts = run_activities(load_run(write_run(tmp_path / "run", ranks)))
    assert [acts.strings[g] for g in acts.group.tolist()] == ["7 [0,1]", "7 [0,1]"]


def test_aligned_subtracts_each_ranks_offset(tmp_path):
    acts = run_activities(_two_ranks(tmp_path))
    start, end = aligned(acts, np.array([0, 5_000], np.int64))
    assert (start - BASE_NS).tolist() == [0, 40_000, -5_000, 5_000, 90_000]
    assert (end - start).tolist() == (acts.end_ns - acts.start_ns).tolist()


def test_exposed_time_agrees_with_a_brute_force_count(tmp_path):
    """Random kernels on two ranks; the expected exposed time counts, ns by ns, the kernel's
    nanoseconds that no compute interval of its rank covers."""
    rng = np.random.default_rng(3)
    ranks = [RankTrace(0), RankTrace(1)]
    for r in ranks:
        for _ in range(8):
            r.kernel("gemm", float(rng.integers(0, 400)), float(rng.integers(1, 60)))
            r.kernel(
                "ncclDevKernel_AllGather",
                float(rng.integers(0, 400)),
                float(rng.integers(1, 60)),
                stream=14,
                collective=AG,
            )
    run = load_run(write_run(tmp_path / "run", ranks))
    acts = run_activities(run)
    gemm = np.array([acts.strings[i] == "gemm" for i in acts.name.tolist()])
    covers, covered = [], []
    for pos in range(2):
        lo, hi = acts.rank_bounds[pos], acts.rank_bounds[pos + 1]
        m = gemm[lo:hi]
        covers.append(iv.union(acts.start_ns[lo:hi][m], acts.end_ns[lo:hi][m]))
        grid = np.zeros(500_000, bool)  # one cell per ns of the rank's first 500 µs
        for s, e in zip(acts.start_ns[lo:hi][m] - BASE_NS, acts.end_ns[lo:hi][m] - BASE_NS):
            grid[s:e] = True
        covered.append(grid)
    got = exposed_ns(acts, covers)
    for row in range(len(acts)):
        s, e = acts.start_ns[row] - BASE_NS, acts.end_ns[row] - BASE_NS
        want = int((~covered[acts.rank_pos[row]][s:e]).sum())
        assert got[row] == want, row
    assert (got[gemm] == 0).all() and (got[~gemm] > 0).any()


def test_a_run_without_ranks_is_refused():
    class NoRanks:
        ranks: list = []

    with pytest.raises(ValueError, match="without ranks"):
        run_activities(NoRanks())


def test_a_tensor_of_more_than_two_billion_elements_keeps_its_count(tmp_path):
    """The count columns are int32 until a value needs more: a 3e9-element all-gather on rank 1
    widens them, and rank 0's values, filled before, stay."""
    big = Collective(
        "_allgather_base",
        in_nelems=3_000_000_000,
        out_nelems=6_000_000_000,
        dtype="BFloat16",
        pg="7",
        on_kernel=True,
    )
    r0, r1 = RankTrace(0), RankTrace(1)
    r0.kernel("ncclDevKernel_AllGather", 0, 50, collective=AG)
    r1.kernel("gemm", 0, 10)
    r1.kernel("ncclDevKernel_AllGather", 10, 50, collective=big)
    acts = run_activities(load_run(write_run(tmp_path / "run", [r0, r1])))
    assert acts.in_nelems.tolist() == [1024, -1, 3_000_000_000]
    assert acts.out_nelems.tolist() == [2048, -1, 6_000_000_000]
    small = run_activities(_two_ranks(tmp_path / "small"))
    assert small.in_nelems.dtype == np.int32 and small.in_nelems.tolist() == [
        -1,
        1024,
        -1,
        -1,
        1024,
    ]
