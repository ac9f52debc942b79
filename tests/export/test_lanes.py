"""Lanes named by role (tpscope/export/lanes.py) on a hand-built trace whose roles are known."""

from __future__ import annotations

from tests.kineto import Collective, RankTrace, write_run
from tpscope.export.lanes import lane_names
from tpscope.trace import load_run


def test_each_stream_is_named_by_what_it_does(tmp_path):
    r = RankTrace(0, world_size=2)
    r.gpu_annotation("ProfilerStep#1", 0, 1000)
    r.kernel("gemm", 0, 300, stream=7)  # compute only
    r.kernel("ncclDevKernel_AllGather", 0, 200, stream=14, collective=Collective(pg="tp"))
    r.memcpy("Memcpy HtoD (Pageable -> Device)", 0, 100, stream=20)  # the copy engine
    r.kernel("gemm", 0, 600, stream=9)  # 60% compute ...
    r.kernel(
        "ncclDevKernel_ReduceScatter",
        600,
        400,
        stream=9,  # ... and 40% NCCL of group tp
        collective=Collective("_reduce_scatter_base", pg="tp"),
    )
    r.kernel("gemm", 0, 950, stream=11)  # 95% compute, 5% NCCL: compute alone
    r.kernel("ncclDevKernel_AllGather", 950, 50, stream=11, collective=Collective(pg="dp"))
    (rank,) = load_run(write_run(tmp_path / "roles", [r])).ranks
    names = dict(zip((int(s) for _, s in rank.lanes.tolist()), lane_names(rank)))
    assert names == {
        7: "stream 7 · compute",
        14: "stream 14 · NCCL · group tp",
        20: "stream 20 · copy engine",
        9: "stream 9 · compute + NCCL · group tp",
        11: "stream 11 · compute",
    }
