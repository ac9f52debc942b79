"""metrics.md §5: collective matching, wait versus transfer, skew, bytes and bus bandwidth."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tests.kineto import Collective, RankTrace, write_run
from tests.metrics._jobs import CHUNKED, RING, tp_dp, tp_pp
from tpscope.metrics import analyze_run
from tpscope.metrics.activities import run_activities
from tpscope.metrics.collectives import (
    busbw_factor,
    collective_kind,
    collective_timing,
    match_collectives,
)
from tpscope.trace import load_run

AG = Collective("_allgather_base", in_nelems=1024, out_nelems=2048, dtype="BFloat16", group_size=2)
AG_OTHER = Collective(
    "_allgather_base", in_nelems=512, out_nelems=1024, dtype="BFloat16", group_size=2
)
RS = Collective(
    "_reduce_scatter_base", in_nelems=2048, out_nelems=1024, dtype="BFloat16", group_size=2
)


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
        ("_allgather_base", pytest.approx(10.0)),
        ("_reduce_scatter_base", pytest.approx(5.0)),
    ]
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
            t.kernel(
                "ncclDevKernel_X",
                float(starts[r, k]),
                float(ends[r, k] - starts[r, k]),
                stream=14,
                collective=Collective(
                    coll.name, coll.in_nelems, coll.out_nelems, group_size=n_ranks
                ),
            )
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
                ends[r, k] - starts[r, k], abs=0.002
            )


def _row_of(acts, rank, k):
    rows = np.flatnonzero(acts.rank == rank)
    return rows[np.argsort(acts.start_ns[rows])][k]


def test_json_fields_of_metrics_md(tmp_path):
    """The `tpscope analyze --json` fields (docs/metrics.md) for §5-§9 are present and plain JSON."""
    import json

    from tpscope.metrics import as_json

    r0, r1 = RankTrace(0), RankTrace(1)
    for r, late in ((r0, 0), (r1, 5)):
        r.kernel("gemm", 0, 100 + late)
        r.kernel("ncclDevKernel_AllGather", 100 + late, 50 - late, collective=AG)
    doc = json.loads(
        json.dumps(as_json(analyze_run(load_run(write_run(tmp_path / "run", [r0, r1])))))
    )
    assert {
        "step",
        "key",
        "collective",
        "bytes",
        "ranks",
        "skew_us",
        "transfer_us",
        "busbw_gbps",
    } <= set(doc["collectives"][0])
    assert {
        "step",
        "length_us",
        "compute_us",
        "comm_us",
        "memory_us",
        "host_us",
        "idle_us",
        "exposed_comm_ratio",
        "ranks",
    } <= set(doc["critical_path"][0])
    assert {"comm_wait_us", "comm_transfer_us", "contention_tax_us", "contention_slowdown"} <= set(
        doc["steps"][0]
    )
    assert {"critical_path_exposed_comm_ratio", "contention_slowdown"} <= set(doc["summary"])
    assert doc["clock_offsets_us"] == {"0": 0.0, "1": 0.0}
    assert doc["steps"][0]["contention_tax_us"] is None  # unknown, not a made-up 0


# ---- process groups, point-to-point, older traces (metrics.md §5) ------------------------------


REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def _raw_kernels(run: Path, rank: int, pred) -> list[dict]:
    """Brute force from the JSON: the rank's kernels for which `pred(event)` holds, by start."""
    for p in sorted(run.iterdir()):
        if p.name.endswith(".json.gz"):
            doc = json.loads(gzip.decompress(p.read_bytes()))
            if doc["distributedInfo"]["rank"] == rank:
                return sorted(
                    (e for e in doc["traceEvents"] if e.get("cat") == "kernel" and pred(e)),
                    key=lambda e: e["ts"],
                )
    raise AssertionError(rank)


def test_groups_that_share_a_name_match_only_among_their_ranks(tmp_path):
    a = analyze_run(load_run(tp_dp(tmp_path / "job", shift_us=2345.678)))
    by_group = {}
    for c in a.collectives:
        by_group.setdefault((c.group, c.collective), set()).add(tuple(c.ranks))
    assert by_group == {
        ("tp [0,1] tp", "_allgather_base"): {(0, 1)},
        ("tp [2,3] tp", "_allgather_base"): {(2, 3)},
        ("dp0 [0,2] dp", "_reduce_scatter_base"): {(0, 2)},
        ("dp1 [1,3] dp", "_reduce_scatter_base"): {(1, 3)},
    }
    n_ag = len(
        _raw_kernels(CHUNKED, 0, lambda e: e["args"].get("Collective name") == "_allgather_base")
    )
    n_rs = len(
        _raw_kernels(
            CHUNKED, 0, lambda e: e["args"].get("Collective name") == "_reduce_scatter_base"
        )
    )
    counts = {}
    for c in a.collectives:
        counts[c.group] = counts.get(c.group, 0) + 1
    assert counts == {
        "tp [0,1] tp": n_ag,
        "tp [2,3] tp": n_ag,
        "dp0 [0,2] dp": n_rs,
        "dp1 [1,3] dp": n_rs,
    }
    assert not a.warnings


def test_send_recv_pairs_by_group_peer_and_order(tmp_path):
    a = analyze_run(load_run(tp_pp(tmp_path / "job")))
    p2p = [c for c in a.collectives if c.collective == "send_recv"]
    s0 = _raw_kernels(RING, 0, lambda e: "SendRecv" in e["name"])
    s1 = _raw_kernels(RING, 1, lambda e: "SendRecv" in e["name"])
    assert len(s0) == len(s1)
    assert sorted(tuple(c.ranks) for c in p2p) == sorted([(0, 2)] * len(s0) + [(1, 3)] * len(s0))
    assert {c.group for c in p2p} == {"pp0 [0,2] pp", "pp1 [1,3] pp"}
    # the k-th exchange of stage 0 with stage 1: skew and transfer from the raw kernels (one clock)
    skews = sorted(abs(x["ts"] - y["ts"]) for x, y in zip(s0, s1))
    spans = sorted(
        max(x["ts"] + x["dur"], y["ts"] + y["dur"]) - max(x["ts"], y["ts"]) for x, y in zip(s0, s1)
    )
    pp0 = [c for c in p2p if c.ranks == [0, 2]]
    assert [c.skew_us for c in sorted(pp0, key=lambda c: c.skew_us)] == pytest.approx(
        skews, abs=0.002
    )
    assert sorted(c.transfer_us for c in pp0) == pytest.approx(spans, abs=0.002)
    # bytes: each rank sends one 2048 x 8192 bf16 tensor per exchange (the send ops' In msg nelems)
    assert {c.bytes for c in pp0} == {2 * 2048 * 8192 * 2}
    assert all(c.busbw_gbps == pytest.approx(c.bytes / (c.transfer_us * 1e3)) for c in pp0)
    # the TP collectives still match within their own groups
    assert {tuple(c.ranks) for c in a.collectives if c.collective != "send_recv"} == {
        (0, 1),
        (2, 3),
    }
    # the critical path crosses the stages: only send/recv join rank 0 or 1 to rank 2 or 3
    assert all({0, 1} & set(p.ranks) and {2, 3} & set(p.ranks) for p in a.critical_path)


def test_batched_send_recv_with_several_peers_links_a_ring(tmp_path):
    """batch_isend_irecv on 3 ranks: each kernel sends to the next rank and receives from the
    previous one; the three kernels of one round are one instance."""
    ranks = []
    for r in range(3):
        t = RankTrace(r, world_size=3)
        t.cpu_annotation("ProfilerStep#1", 0, 1000)
        for k in range(2):
            base = 100.0 + 300 * k
            t.p2p_batch(
                base + 10 * r,
                50,
                [("send", (r + 1) % 3, 1024), ("recv", (r - 1) % 3, 1024)],
                ranks=[0, 1, 2],
            )
        ranks.append(t)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    p2p = [c for c in a.collectives if c.collective == "send_recv"]
    assert [c.ranks for c in p2p] == [[0, 1, 2], [0, 1, 2]]
    # rank 2 starts 20 µs after rank 0
    assert [c.skew_us for c in p2p] == pytest.approx([20.0, 20.0])
    assert {c.bytes for c in p2p} == {3 * 1024 * 2}


def test_older_traces_match_by_order_of_kind_and_size_marked_inferred():
    a = analyze_run(load_run(REAL / "param-dlrm-torchrec-v100x8"))
    # brute force: every rank launches 3 NCCL all-reduce and 5 SendRecv (all-to-all) kernels
    assert sorted((c.collective, tuple(c.ranks)) for c in a.collectives) == sorted(
        [("all_reduce", tuple(range(8)))] * 3 + [("all_to_all", tuple(range(8)))] * 5
    )
    assert all(c.inferred for c in a.collectives)
    assert not any("matched" in w for w in a.warnings)


def test_one_rank_of_many_names_its_missing_group_members():
    a = analyze_run(load_run(REAL / "tracelens-b200-eager-rank0of8"))
    # one rank of a world of 8: none of its collectives is shown as matched (§5), all transfer;
    # the raw JSON holds 73 multimem all-reduce kernels and 1 NCCL all-gather
    assert a.collectives == []
    assert any(
        "one rank of world size 8 in the folder: its 74 communication activities cannot be matched"
        in w
        for w in a.warnings
    ), a.warnings
    (step,) = a.steps
    assert step.comm_wait_us == 0 and step.comm_transfer_us == step.comm_us
    assert any("3 [0,1,2,3,4,5,6,7] lacks rank(s) 1-7" in w for w in a.warnings), a.warnings
    assert any("world size 8 but no trace for 7 rank(s): 1-7" in w for w in a.warnings), a.warnings


def test_communication_that_nothing_can_match_is_a_warning(tmp_path):
    ranks = []
    for r in range(2):
        t = RankTrace(r)
        t.gpu_annotation("ProfilerStep#1", 0, 100)
        t.kernel("nvshmemi_transfer_kernel", 10, 20, stream=14)
        ranks.append(t)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    assert a.collectives == []
    assert any(
        "none of the 2 communication activities could be matched" in w for w in a.warnings
    ), a.warnings
    assert _by(a, 0, 1).comm_transfer_us == pytest.approx(20.0)


def test_pg_config_gives_the_ranks_of_groups_the_kernels_do_not_describe(tmp_path):
    """4 ranks, two TP pairs whose kernels both say only `Process Group Name` "1": pg_config tells
    the pairs apart, so each all-gather matches within its pair (by name alone all 4 would merge)."""
    ranks = []
    for r in range(4):
        pair = [0, 1] if r < 2 else [2, 3]
        t = RankTrace(r, world_size=4, pg_config=[{"pg_name": "1", "pg_desc": "TP", "ranks": pair}])
        t.gpu_annotation("ProfilerStep#1", 0, 1000)
        for k in range(3):
            t.kernel(
                "ncclDevKernel_AllGather",
                100 + 200 * k + 5 * r,
                50,
                stream=14,
                collective=Collective("_allgather_base", pg="1", group_size=2),
            )
        ranks.append(t)
    a = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    assert sorted(tuple(c.ranks) for c in a.collectives) == [(0, 1)] * 3 + [(2, 3)] * 3
    assert {c.group for c in a.collectives} == {"1 [0,1] TP", "1 [2,3] TP"}
    assert all(c.skew_us == pytest.approx(5.0) for c in a.collectives)


def test_the_critical_path_changes_rank_only_through_a_shared_instance(tmp_path):
    """TP x PP and TP x DP: wherever two consecutive segments of a step's path lie on different
    ranks, both are kernels of one matched instance (a collective or a send/recv pair)."""
    from tpscope.metrics.clocks import clock_offsets
    from tpscope.metrics.critical_path import path_graph, step_walks

    crossings = {}
    for name, folder in (
        ("pp", tp_pp(tmp_path / "pp")),
        ("dp", tp_dp(tmp_path / "dp", shift_us=2345.678)),
    ):
        run = load_run(folder)
        acts = run_activities(run)
        match = match_collectives(acts)
        offsets = clock_offsets(acts, match).offsets_ns
        graph = path_graph(
            acts, match, collective_timing(acts, match, offsets), offsets, list(run.ranks)
        )
        crossings[name] = 0
        for _, _, _, seg in step_walks(acts, graph):
            for i in np.flatnonzero(seg.rank_pos[1:] != seg.rank_pos[:-1]).tolist():
                a, b = int(seg.row[i]), int(seg.row[i + 1])
                assert (
                    a >= 0
                    and b >= 0
                    and match.instance[a] >= 0
                    and match.instance[a] == match.instance[b]
                )
                crossings[name] += 1
    assert crossings["pp"] > 0  # the pipeline's path does cross its stages


def test_one_rank_alone_gets_its_collectives(tmp_path):
    """A single rank's trace: each collective is an instance of its own, no wait, all transfer."""
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 500)
    r.kernel("gemm", 0, 100)
    for k, (start, dur) in enumerate(((100, 60), (300, 90))):
        r.kernel(
            "ncclDevKernel_AllReduce",
            start,
            dur,
            stream=14,
            collective=Collective(
                "allreduce",
                in_nelems=256,
                out_nelems=256,
                dtype="Float",
                seq=k,
                group_size=1,
                on_kernel=True,
            ),
        )
    analysis = analyze_run(load_run(write_run(tmp_path / "one", [r]), workers=1))
    assert [(c.transfer_us, c.wait_us, c.ranks) for c in analysis.collectives] == [
        (60.0, 0.0, [0]),
        (90.0, 0.0, [0]),
    ]
