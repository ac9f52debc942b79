"""Column- and row-parallel layers: outputs and gradients equal a single-process reference
(plain torch on the full weights), in every mode, world 2."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from tests.fusion._dist import run_world
from tpscope.fusion.model.layers import ColumnParallelLinear, RowParallelLinear
from tpscope.runfolder.fusion_choice import FusionChoice

S, H, FF = 8, 6, 12  # tokens, hidden, ffn


def _reference(x, w1, w2, r):
    x = x.clone().requires_grad_(True)
    w1 = w1.clone().requires_grad_(True)
    w2 = w2.clone().requires_grad_(True)
    z = F.gelu(x @ w1) @ w2
    (z * r).sum().backward()
    return z.detach(), x.grad, w1.grad, w2.grad


def _layers(rank: int, world: int) -> None:
    g = torch.Generator().manual_seed(3)
    x, w1, w2 = (
        torch.randn(S, H, generator=g),
        torch.randn(H, FF, generator=g),
        torch.randn(FF, H, generator=g),
    )
    r = torch.randn(S, H, generator=g)
    z_ref, dx_ref, dw1_ref, dw2_ref = _reference(x, w1, w2, r)
    rows, cols = S // world, FF // world
    mine = slice(rank * rows, (rank + 1) * rows)
    my_cols = slice(rank * cols, (rank + 1) * cols)
    # all-gather exchange at world 2
    fusions = [
        FusionChoice(mode="none"),
        FusionChoice(mode="chunked", chunks=2),
        FusionChoice(mode="chunked", chunks=rows),
        FusionChoice(mode="ring"),
        FusionChoice(mode="chunked", chunks=2, own_first=False),
        FusionChoice(mode="chunked", chunks=2, sm_margin=8),
        FusionChoice(mode="ring", chunks=2),  # tapered pieces (the ring's default)
        FusionChoice(mode="ring", chunks=2, ring_all_gather=True),
    ]
    fusions += [replace(f, bwd_overlap=False) for f in fusions if f.mode != "none"]
    for fusion in fusions:
        col = ColumnParallelLinear(H, cols, fusion=fusion, label="fc1")
        row = RowParallelLinear(cols, H, fusion=fusion, label="fc2")
        with torch.no_grad():
            col.weight.copy_(w1[:, my_cols])
            row.weight.copy_(w2[my_cols])
        x_shard = x[mine].clone().requires_grad_(True)
        z = row(F.gelu(col(x_shard)))
        (z * r[mine]).sum().backward()
        what = str(fusion)
        torch.testing.assert_close(z.detach(), z_ref[mine], rtol=1e-5, atol=1e-5, msg=what)
        torch.testing.assert_close(x_shard.grad, dx_ref[mine], rtol=1e-5, atol=1e-5, msg=what)
        torch.testing.assert_close(
            col.weight.grad, dw1_ref[:, my_cols], rtol=1e-5, atol=1e-5, msg=what
        )
        torch.testing.assert_close(
            row.weight.grad, dw2_ref[my_cols], rtol=1e-5, atol=1e-5, msg=what
        )


def test_layer_gradients_equal_single_process_world2():
    run_world(_layers, 2)


def test_layer_gradients_equal_single_process_world4():
    run_world(_layers, 4)


def _cpu_fusions(rows: int) -> list[FusionChoice]:
    """Every fusion a CPU (gloo) run can take: unfused, chunked and ring at several chunk counts,
    own-shard-first or not, backward overlap on and off, the ring's all-gather exchange."""
    fusions = [
        FusionChoice(mode="none"),
        FusionChoice(mode="chunked", chunks=1),
        FusionChoice(mode="chunked", chunks=2),
        FusionChoice(mode="chunked", chunks=rows),
        FusionChoice(mode="chunked", chunks=2, own_first=False),
        FusionChoice(mode="ring"),
        FusionChoice(mode="ring", chunks=2),
        FusionChoice(mode="ring", chunks=2, ring_all_gather=True),
    ]
    return fusions + [replace(f, bwd_overlap=False) for f in fusions if f.mode != "none"]


def _ops_against_autograd(rank: int, world: int) -> None:
    """Each fused op alone against torch autograd through the unfused op, written with
    torch.distributed.nn's differentiable all-reduce (an all-gather is the all-reduce of the
    rows zero-padded to their place; a reduce-scatter, the all-reduce's own rows)."""
    import torch.distributed.nn.functional as dnn

    from tpscope.fusion.model.layers import AllGatherMatmulFn, MatmulReduceScatterFn

    # each rank its own shard, weights and output weights
    g = torch.Generator().manual_seed(10 + rank)
    rows, k, n = S // world, H, FF // world
    mine = slice(rank * rows, (rank + 1) * rows)
    x, w_ag, r_ag = (
        torch.randn(rows, k, generator=g),
        torch.randn(k, n, generator=g),
        torch.randn(S, n, generator=g),
    )
    y, w_rs, r_rs = (
        torch.randn(S, n, generator=g),
        torch.randn(n, k, generator=g),
        torch.randn(rows, k, generator=g),
    )

    xr, wr = x.clone().requires_grad_(True), w_ag.clone().requires_grad_(True)
    padded = torch.zeros(S, k).index_copy(0, torch.arange(S)[mine], xr)
    ag_ref = dnn.all_reduce(padded) @ wr
    (ag_ref * r_ag).sum().backward()
    yr, wr2 = y.clone().requires_grad_(True), w_rs.clone().requires_grad_(True)
    rs_ref = dnn.all_reduce(yr @ wr2)[mine]
    (rs_ref * r_rs).sum().backward()

    for fusion in _cpu_fusions(rows):
        xf, wf = x.clone().requires_grad_(True), w_ag.clone().requires_grad_(True)
        out = AllGatherMatmulFn.apply(xf, wf, None, fusion, "ag")
        (out * r_ag).sum().backward()
        yf, wf2 = y.clone().requires_grad_(True), w_rs.clone().requires_grad_(True)
        out2 = MatmulReduceScatterFn.apply(yf, wf2, None, fusion, "rs")
        (out2 * r_rs).sum().backward()
        what = str(fusion)
        for got, want in (
            (out, ag_ref),
            (xf.grad, xr.grad),
            (wf.grad, wr.grad),
            (out2, rs_ref),
            (yf.grad, yr.grad),
            (wf2.grad, wr2.grad),
        ):
            torch.testing.assert_close(got.detach(), want.detach(), rtol=1e-5, atol=1e-5, msg=what)


def test_each_fused_op_has_the_gradients_of_the_unfused_op_world2():
    run_world(_ops_against_autograd, 2)
