"""metrics.md §11's fuse=: AG-GEMM / GEMM-RS pairs found by pattern on a trace without tpscope's
ranges, and the chunk pipeline's makespan on inputs whose schedule is worked out by hand."""

from __future__ import annotations

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics.whatif import predict, prepare
from tpscope.metrics.whatif_changes import parse_change
from tpscope.metrics.whatif_fuse import AG, RS, pipeline_ns
from tpscope.trace import load_run

M, K, N = 64, 32, 48  # gathered rows M, tp = 2
TYPES = ["c10::BFloat16", "c10::BFloat16"]


def _layer() -> list[RankTrace]:
    """Per rank: an all-gather of M·K elements [0, 100], the GEMM [M,K]x[K,N] [100, 300], the GEMM
    [M,N]x[N,K] [300, 500], a reduce-scatter of its M·K output elements [500, 600]; then a decoy
    all-gather of another size [600, 650] before the first GEMM's shape [650, 850], which is not
    its input."""
    ag = Collective("_allgather_base", in_nelems=M * K // 2, out_nelems=M * K, group_size=2)
    rs = Collective("_reduce_scatter_base", in_nelems=M * K, out_nelems=M * K // 2, group_size=2)
    decoy = Collective("_allgather_base", in_nelems=10, out_nelems=20, group_size=2)
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.cpu_annotation("ProfilerStep#1", -60, 1000)
        r.kernel("ncclDevKernel_AllGather", 0, 100, launch_us=(-50, 1), collective=ag)
        r.kernel(
            "gemm", 100, 200, launch_us=(-45, 1), input_dims=[[M, K], [K, N]], input_type=TYPES
        )
        r.kernel(
            "gemm", 300, 200, launch_us=(-40, 1), input_dims=[[M, N], [N, K]], input_type=TYPES
        )
        r.kernel("ncclDevKernel_ReduceScatter", 500, 100, launch_us=(-30, 1), collective=rs)
        r.kernel("ncclDevKernel_AllGather", 600, 50, launch_us=(-20, 1), collective=decoy)
        r.kernel(
            "gemm", 650, 200, launch_us=(-10, 1), input_dims=[[M, K], [K, N]], input_type=TYPES
        )
        ranks.append(r)
    return ranks


def test_pairs_found_by_pattern_on_a_foreign_trace(tmp_path):
    inp = prepare(load_run(write_run(tmp_path / "run", _layer())))
    w = predict(inp, [])
    assert w.pairs == [f"ag_gemm ({M}x{K}x{N})", f"gemm_rs ({M}x{N}x{K})"]
    assert len(inp.pairs) == 4  # one of each per rank; the decoy all-gather is not paired


def test_fused_pair_replaces_transfer_and_gemm_by_the_pipeline(tmp_path):
    """fuse=copy_engine:1 with the assumed 3% slowdown. AG-GEMM: the own half (100 µs) beside the
    one transfer (100 µs): 103 µs, then the peer's half 100 µs: 203 µs. GEMM-RS: the peer's rows
    (100 µs), their transfer (100 µs) beside the own rows (103 µs): 203 µs. The step: the AG pair
    [0, 203], the GEMM-RS pair [203, 406] (its reduce-scatter now takes no time), the decoy
    [406, 456] and the last GEMM [456, 656]."""
    inp = prepare(load_run(write_run(tmp_path / "run", _layer())))
    w = predict(inp, [parse_change("fuse=copy_engine:1")])
    assert w.measured_steps_us == pytest.approx([850])
    assert w.changes[0].step_us == pytest.approx([656], abs=1)


@pytest.mark.parametrize(
    "kind, pieces, own, piece, xfer, alpha, slow, expected",
    [
        # AG, 2 pieces of 50 each landing at 50 and 100; own 40·1.1 = 44; piece 0 [50, 50+30·1.1];
        # piece 1 at max(83, 100) = 100, nothing in flight after: 100 + 30 = 130
        (AG, 2, 40, 30, 100, 0, 0.1, 130),
        # GEMM-RS chunked: pieces of 30 each, transfer 50 after each: gemm 30, comm 30-80;
        # gemm2 beside it 30+33 = 63, comm max(80, 63) + 50 = 130
        (RS, 2, 0, 30, 100, 0, 0.1, 130),
        # α: pieces of 10 + 40 = 50 each; same as the first
        (AG, 2, 40, 30, 90, 10, 0.1, 130),
    ],
)
def test_pipeline_by_hand(kind, pieces, own, piece, xfer, alpha, slow, expected):
    assert pipeline_ns(kind, pieces, own, piece, xfer, alpha, slow) == pytest.approx(expected)


def test_fuse_without_pairs_names_the_change(tmp_path):
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -10, 100)
    r.kernel("a", 0, 10, launch_us=(-5, 1))
    inp = prepare(load_run(write_run(tmp_path / "run", [r])))
    from tpscope.metrics.whatif_changes import ChangeError

    with pytest.raises(ChangeError, match="fuse=ring"):
        predict(inp, [parse_change("fuse=ring:2")])


def test_a_transfer_change_in_the_same_row_does_not_undo_the_fusion(tmp_path):
    """comm=1 changes nothing, typed before or after fuse=: the row of both is fuse='s 656 µs."""
    inp = prepare(load_run(write_run(tmp_path / "run", _layer())))
    for texts in (["fuse=copy_engine:1", "comm=1"], ["comm=1", "fuse=copy_engine:1"]):
        w = predict(inp, [parse_change(t) for t in texts])
        assert w.changes[-1].step_us == pytest.approx([656], abs=1), texts


def test_hidden_transfers_leave_the_fused_pairs_their_gemms_alone(tmp_path):
    """hide=all with fuse=copy_engine:1: no transfer, no slowdown: each pair is its GEMM's 200 µs;
    the decoy all-gather takes nothing: 200 + 200 + 200 = 600 µs."""
    inp = prepare(load_run(write_run(tmp_path / "run", _layer())))
    w = predict(inp, [parse_change("hide=all"), parse_change("fuse=copy_engine:1")])
    assert w.changes[0].step_us == pytest.approx([200 + 200 + 200])  # hide=all alone
    assert w.changes[-1].step_us == pytest.approx([600], abs=1)
