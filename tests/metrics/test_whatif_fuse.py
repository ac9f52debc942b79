"""metrics.md §11's fuse=: AG-GEMM / GEMM-RS pairs found by pattern on a trace without tpscope's
ranges, and the chunk pipeline's makespan on inputs whose schedule is worked out by hand."""

from __future__ import annotations

import numpy as np
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


def _backward(kind: str, xfer_us: float, wgrad_shape_ok: bool = True) -> list[RankTrace]:
    """Per rank, one backward pair and the GEMM after it. `rs`: the input gradient [M,N]x[N,K]
    [0, 200], its reduce-scatter of M·K elements [200, 300], then the weight gradient
    [K,M]x[M,N] [300, 500] (contraction M, output K·N). `ag`: the all-gather of the output
    gradient (M·N elements) [0, xfer], the input gradient [M,N]x[N,K] after it, then the weight
    gradient [K,M]x[M,N]. `wgrad_shape_ok=False`: the GEMM after contracts over N instead, so it
    is not the pair's weight gradient."""
    wdims = [[K, M], [M, N]] if wgrad_shape_ok else [[K, N], [N, M]]
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.cpu_annotation("ProfilerStep#1", -60, 2000)
        if kind == "rs":
            rs = Collective(
                "_reduce_scatter_base", in_nelems=M * K, out_nelems=M * K // 2, group_size=2
            )
            r.kernel(
                "gemm", 0, 200, launch_us=(-45, 1), input_dims=[[M, N], [N, K]], input_type=TYPES
            )
            r.kernel("ncclDevKernel_ReduceScatter", 200, xfer_us, launch_us=(-40, 1), collective=rs)
            t = 200 + xfer_us
        else:
            ag = Collective("_allgather_base", in_nelems=M * N // 2, out_nelems=M * N, group_size=2)
            r.kernel("ncclDevKernel_AllGather", 0, xfer_us, launch_us=(-45, 1), collective=ag)
            r.kernel(
                "gemm",
                xfer_us,
                200,
                launch_us=(-40, 1),
                input_dims=[[M, N], [N, K]],
                input_type=TYPES,
            )
            t = xfer_us + 200
        r.kernel("gemm", t, 200, launch_us=(-35, 1), input_dims=wdims, input_type=TYPES)
        ranks.append(r)
    return ranks


@pytest.mark.parametrize(
    "kind, xfer, change, expected",
    [
        # GEMM-RS chunked:2, assumed 10%: 2 pieces, each the two ranks' blocks of M/4 rows
        # (2 x 50 µs, linear in M), transfers of 50 µs: piece 0 [0, 100], its transfer
        # [100, 150]; piece 1 beside it 110: [100, 210], its transfer [210, 260]; the weight
        # gradient (200 µs, its own shape's baseline) beside that transfer: 220, [210, 430]
        ("rs", 100, "fuse=chunked:2", 430),
        # no-bwd: the pipeline ends with the last transfer at 260, then the weight gradient: 460
        ("rs", 100, "fuse=chunked:2:no-bwd", 460),
        # ring: the weight gradient after the pipeline. Ring at 2 ranks, 2 pieces of M/4 rows
        # (50 µs each): piece 0 [0, 50], transfer [50, 100]; piece 1 beside it [50, 105],
        # transfer [105, 155]; the own rows (M/2, 100 µs) beside it: [105, 215]; + 200: 415
        ("rs", 100, "fuse=ring:2", 415),
        # AG-GEMM chunked:2, transfer 400 µs: pieces land at 200 and 400; own rows (M/2, 100 µs)
        # beside them: [0, 110]; the own block of the weight gradient (half its contraction,
        # 100 µs) beside them: [110, 220]; piece 0 (M/4 rows, 50 µs) at 220, beside: [220, 275];
        # piece 1 at 400: [400, 450]; the peer's block of the weight gradient after: 550
        ("ag", 400, "fuse=chunked:2", 550),
        # no-bwd: own [0, 110], piece 0 [200, 255], piece 1 [400, 450], weight gradient 200: 650
        ("ag", 400, "fuse=chunked:2:no-bwd", 650),
    ],
)
def test_backward_weight_gradient_beside_the_transfers(tmp_path, kind, xfer, change, expected):
    inp = prepare(load_run(write_run(tmp_path / "run", _backward(kind, xfer))))
    assert (inp.pairs.wgrad_row >= 0).all()
    w = predict(inp, [parse_change(change)])
    assert w.changes[0].step_us == pytest.approx([expected], abs=1)
    beside = "no-bwd" not in change and "ring" not in change  # one per rank when moved
    assert any("2 backward weight gradients" in n for n in w.changes[0].notes) == beside


def test_a_gemm_of_another_contraction_is_not_the_weight_gradient(tmp_path):
    """The GEMM after the pair contracts over N, not the pair's M rows: it stays after the
    pipeline, as with no-bwd (460 µs)."""
    inp = prepare(load_run(write_run(tmp_path / "run", _backward("rs", 100, False))))
    assert (inp.pairs.wgrad_row < 0).all()
    w = predict(inp, [parse_change("fuse=chunked:2")])
    assert w.changes[0].step_us == pytest.approx([460], abs=1)


def test_ring_pieces_by_a_send_recv_fit_count_every_ranks_bytes(tmp_path):
    """§5 counts a send/recv's bytes over every rank of its ring: the reduce-scatter's M·K bf16
    elements (4096 B) times f = 1/2, sent by each of the 2 ranks: 4096 B at 0.01024 GB/s is
    400 µs, 200 µs per piece. Piece 0 [0, 50], its transfer [50, 250]; piece 1 beside it
    [50, 105], its transfer [250, 450]; the own rows [105, 215]; then the weight gradient
    (a ring computes it after the pipeline): 450 + 200 = 650."""
    from tpscope.metrics.whatif import P2P, ContentionSource
    from tpscope.metrics.whatif_changes import AlphaBeta

    inp = prepare(load_run(write_run(tmp_path / "run", _backward("rs", 100))))
    fit = {"send_recv": AlphaBeta("send_recv", 0.0, 4096 / 400_000, 4, 0.0)}
    src = ContentionSource(0.1, "a ring run", "sm", fit, {P2P: 0.1}, {})
    w = predict(inp, [parse_change("fuse=ring:2")], src)
    assert w.changes[0].step_us == pytest.approx([650], abs=1)


def test_a_shape_measured_slowdown_comes_before_the_overall_one(tmp_path):
    """The contention source measured 100% on the pieces' shape (M/4 rows), 10% overall: piece 0
    [0, 100], its transfer [100, 150]; piece 1 beside it 2 x 100: [100, 300], its transfer
    [300, 350]; the weight gradient (no measurement of its shape: 10%) beside it: [300, 520]."""
    import dataclasses

    from tpscope.metrics.whatif import COLL, ContentionSource

    inp = prepare(load_run(write_run(tmp_path / "run", _backward("rs", 100))))
    shape = next(s for s in inp.gemms.shapes if (s.m, s.k, s.n) == (M, N, K))
    piece = dataclasses.replace(shape, m=M // 4)
    src = ContentionSource(0.1, "a chunked run", "sm", {}, {COLL: 0.1}, {(piece, COLL): 1.0})
    w = predict(inp, [parse_change("fuse=chunked:2")], src)
    assert w.changes[0].step_us == pytest.approx([520], abs=1)


def _pairs(layers: list[str]):
    from tpscope.metrics.whatif_fuse import Pairs

    n = len(layers)
    idx = np.arange(n)
    return Pairs(
        np.array([AG] * n, object), idx, idx, idx, np.array(layers, object), -1 - idx, -1 - idx
    )


LAYERS = ["block0.attn.qkv", "block0.attn.qkv.bwd", "block1.mlp.fc1", "head"]


def test_layers_select_pairs_by_prefix_and_a_later_fuse_takes_them_over():
    from tpscope.metrics.whatif_fuse import overridden, selected_pairs

    p = _pairs(LAYERS)
    assert selected_pairs(p, "block0").tolist() == [True, True, False, False]
    assert selected_pairs(p, "head,block1.mlp").tolist() == [False, False, True, True]
    assert selected_pairs(p, None).all()
    assert overridden(p, [("fuse=ring@block0", "block0"), ("fuse=chunked:2", None)]) == [
        "fuse=ring@block0: 2 of its 2 pairs fused by a later fuse="
    ]
    assert overridden(p, [("fuse=chunked:2", None), ("fuse=ring@block0", "block0")]) == [
        "fuse=chunked:2: 2 of its 4 pairs fused by a later fuse="
    ]
    assert overridden(p, [("fuse=ring@head", "head"), ("fuse=chunked@block1", "block1")]) == []


def test_why_no_pair_is_selected():
    from types import SimpleNamespace

    from tpscope.metrics.whatif_fuse import no_pair_reason

    p = _pairs(LAYERS)
    assert "the pairs found: block0.attn.qkv, block0.attn.qkv.bwd, block1.mlp.fc1, head" in (
        no_pair_reason(p, None, "block9")
    )
    fused = SimpleNamespace(fusion_by_layer={"a": {"mode": "chunked"}, "b": {"mode": "none"}})
    assert "fused already (its manifest's modes: chunked)" in no_pair_reason(
        _pairs([]), fused, None
    )
    assert "a run fused already has none" in no_pair_reason(_pairs([]), None, None)


def test_the_last_fuse_of_a_row_gives_each_pair_its_pipeline(tmp_path):
    """fuse=ring:1 then fuse=copy_engine:1 on every pair: the row is copy_engine's 656 µs (by
    hand, above) and says that ring's pairs went to the later change."""
    inp = prepare(load_run(write_run(tmp_path / "run", _layer())))
    w = predict(inp, [parse_change("fuse=ring:1"), parse_change("fuse=copy_engine:1")])
    assert w.changes[-1].step_us == pytest.approx([656], abs=1)
    assert "fuse=ring:1: 4 of its 4 pairs fused by a later fuse=" in w.changes[-1].notes


def test_the_same_fuse_typed_twice_fuses_once(tmp_path):
    """fuse=copy_engine:1 twice: the row of both is the one change's 656 µs (by hand, above)."""
    inp = prepare(load_run(write_run(tmp_path / "run", _layer())))
    w = predict(inp, [parse_change("fuse=copy_engine:1"), parse_change("fuse=copy_engine:1")])
    assert [p.step_us for p in w.changes] == [pytest.approx([656], abs=1)] * 3
