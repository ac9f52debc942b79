"""The process groups of a CPU run's collectives from `pg_config` and gloo's worker threads
(metrics.md §5 "Process groups of CPU runs"), on hand-built runs whose groups are known."""

from __future__ import annotations

import gzip
import json

from tests.kineto import RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.trace import load_run

MAIN, DP_THREAD, TP_THREAD = 100, 300, 400
MESH = {  # rank -> (dp group, tp group) of a dp=2 x tp=2 mesh
    0: (("1", [0, 2]), ("3", [0, 1])),
    1: (("2", [1, 3]), ("3", [0, 1])),
    2: (("1", [0, 2]), ("4", [2, 3])),
    3: (("2", [1, 3]), ("4", [2, 3])),
}


def _gloo(r: RankTrace, start: float, dur: float, tid: int, dims=((64,),)) -> None:
    r.raw(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "gloo:all_reduce",
            "pid": 1,
            "tid": tid,
            "ts": start,
            "dur": dur,
            "args": {"Input Dims": [list(d) for d in dims], "Input type": ["float"]},
        }
    )


def _mesh_rank(rank: int) -> RankTrace:
    (dp, dp_ranks), (tp, tp_ranks) = MESH[rank]
    config = [
        {"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1, 2, 3]},
        {"pg_name": dp, "pg_desc": "mesh_dp", "ranks": dp_ranks},
        {"pg_name": tp, "pg_desc": "mesh_tp", "ranks": tp_ranks},
    ]
    r = RankTrace(rank, world_size=4, pg_config=config)
    r.cpu_annotation("ProfilerStep#1", 0, 1000, tid=MAIN)
    return r


def test_each_worker_thread_takes_the_group_whose_members_it_meets(tmp_path):
    """All-reduces of one size in both groups: dp {0,2} at 100-200, dp {1,3} at 500-600, tp {0,1}
    at 300-400, tp {2,3} at 700-800. As one group they would match the k-th all-reduce of every
    rank into 4-rank instances; by their groups they are four 2-rank instances."""
    ranks = []
    for rank in range(4):
        r = _mesh_rank(rank)
        _gloo(r, 100 if rank in (0, 2) else 500, 100, DP_THREAD)
        _gloo(r, 300 if rank in (0, 1) else 700, 100, TP_THREAD)
        ranks.append(r)
    analysis = analyze_run(load_run(write_run(tmp_path / "mesh", ranks), workers=1))
    got = sorted((c.ranks, c.group) for c in analysis.collectives)
    assert got == [
        ([0, 1], "3 [0,1] mesh_tp"),
        ([0, 2], "1 [0,2] mesh_dp"),
        ([1, 3], "2 [1,3] mesh_dp"),
        ([2, 3], "4 [2,3] mesh_tp"),
    ]
    assert all(c.wait_us == 0 and c.transfer_us == 100 for c in analysis.collectives)
    assert not analysis.warnings


def test_a_collective_of_every_rank_at_once_is_the_larger_group(tmp_path):
    """One all-reduce on all four ranks at the same time: it meets its peers in the TP group and
    in the whole world alike, and is the world's (the larger group)."""
    ranks = []
    for rank in range(4):
        r = _mesh_rank(rank)
        _gloo(r, 100, 100 + 10 * rank, TP_THREAD)
        ranks.append(r)
    analysis = analyze_run(load_run(write_run(tmp_path / "world", ranks), workers=1))
    (c,) = analysis.collectives
    assert c.ranks == [0, 1, 2, 3] and c.group == "0 [0,1,2,3] default_pg"
    assert c.bytes == 64 * 4


def test_no_groups_listed_but_several_warns(tmp_path):
    """A trace that says it had 3 process groups but lists none: matched as one group, with a
    warning naming the rank."""
    folder = tmp_path / "nogroups"
    folder.mkdir()
    for rank in (0, 1):
        r = RankTrace(rank, pg_config=[])
        r.cpu_annotation("ProfilerStep#1", 0, 1000, tid=MAIN)
        _gloo(r, 100, 100, DP_THREAD)
        doc = r.document()
        doc["distributedInfo"]["pg_count"] = 3
        (folder / f"rank{rank}.1.pt.trace.json.gz").write_bytes(
            gzip.compress(json.dumps(doc).encode())
        )
    analysis = analyze_run(load_run(folder, workers=1))
    assert [c.ranks for c in analysis.collectives] == [[0, 1]]
    assert [w for w in analysis.warnings if "no pg_config" in w] == [
        f"rank {r}: 3 process groups but no pg_config in its trace: its collectives are matched as "
        "if in one group (metrics.md §5)"
        for r in (0, 1)
    ]
