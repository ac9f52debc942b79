"""metrics.md §6: clock offsets of ranks on different hosts, recovered from collective ends."""

from __future__ import annotations

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.trace import load_run

SHIFT_US = 1234.567  # rank 1's clock runs this far ahead of rank 0's
AG = Collective("_allgather_base", group_size=2)


def _two_hosts(tmp_path, host0="node-a", host1="node-b", jitter=(0.0, 0.4, -0.3, 0.2, 0.1)):
    """Five all-gathers; rank 1 enters each 7 µs late in true time; ends agree up to `jitter` µs."""
    r0, r1 = RankTrace(0, hostname=host0), RankTrace(1, hostname=host1)
    for k, j in enumerate(jitter):
        t = 1000.0 * k
        r0.kernel("gemm", t, 50)
        r0.kernel("ncclDevKernel_AllGather", t + 50, 60, stream=14, collective=AG)
        r1.kernel("gemm", t + SHIFT_US, 57)
        r1.kernel("ncclDevKernel_AllGather", t + SHIFT_US + 57, 53 + j, stream=14, collective=AG)
    return load_run(write_run(tmp_path / "run", [r0, r1]))


def test_offset_between_hosts_is_recovered_within_1us(tmp_path):
    a = analyze_run(_two_hosts(tmp_path))
    assert a.clock_offsets_us[0] == 0.0
    assert a.clock_offsets_us[1] == pytest.approx(SHIFT_US, abs=1.0)
    # on the aligned clock rank 0 waits the 7 µs rank 1 is late, in each of 5 collectives
    rank0 = next(s for s in a.steps if s.rank == 0)
    assert rank0.comm_wait_us == pytest.approx(5 * 7.0, abs=1.0)
    assert all(c.skew_us == pytest.approx(7.0, abs=1.0) for c in a.collectives)


def test_one_host_shares_one_clock(tmp_path):
    a = analyze_run(_two_hosts(tmp_path, host0="node-a", host1="node-a"))
    assert a.clock_offsets_us == {0: 0.0, 1: 0.0}
    assert all(c.skew_us == pytest.approx(SHIFT_US + 7.0, abs=0.01) for c in a.collectives)


def test_traces_without_host_names_are_taken_as_one_host(tmp_path):
    a = analyze_run(_two_hosts(tmp_path, host0=None, host1=None))
    assert a.clock_offsets_us == {0: 0.0, 1: 0.0}


def test_align_all_aligns_even_on_one_host(tmp_path):
    a = analyze_run(_two_hosts(tmp_path, host0="node-a", host1="node-a"), align="all")
    assert a.clock_offsets_us[1] == pytest.approx(SHIFT_US, abs=1.0)


def test_host_without_shared_collective_keeps_its_clock_with_a_warning(tmp_path):
    r0, r1 = RankTrace(0, hostname="node-a"), RankTrace(1, hostname="node-b")
    r0.kernel("gemm", 0, 50)
    r1.kernel("gemm", SHIFT_US, 50)
    a = analyze_run(load_run(write_run(tmp_path / "run", [r0, r1])))
    assert a.clock_offsets_us == {0: 0.0, 1: 0.0}
    assert any("not aligned" in w for w in a.warnings)


def test_ranks_of_one_host_share_its_offset(tmp_path):
    """Ranks 0, 1 on node-a; ranks 2, 3 on node-b, whose clock is SHIFT_US ahead."""
    ag = Collective("_allgather_base", group_size=4)
    ranks = []
    for rank in range(4):
        shift = SHIFT_US if rank >= 2 else 0.0
        r = RankTrace(rank, world_size=4, hostname="node-b" if rank >= 2 else "node-a")
        for k in range(3):
            start = 1000.0 * k + 3.0 * rank  # rank r enters 3r µs late (true time)
            r.kernel("ncclDevKernel_AllGather", start + shift, 100 - 3.0 * rank + 0.1 * k * (rank % 2),
                     stream=14, collective=ag)
        ranks.append(r)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    assert a.clock_offsets_us[0] == a.clock_offsets_us[1] == 0.0
    assert a.clock_offsets_us[2] == a.clock_offsets_us[3] == pytest.approx(SHIFT_US, abs=1.0)
    assert all(c.skew_us == pytest.approx(9.0, abs=1.0) for c in a.collectives)
