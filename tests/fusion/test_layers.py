"""Column- and row-parallel layers: outputs and gradients equal a single-process reference
(plain torch on the full weights), in every mode, world 2."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from tpscope.fusion.config import FusionChoice
from tpscope.fusion.layers import ColumnParallelLinear, RowParallelLinear

from ._dist import run_world

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
    x, w1, w2 = torch.randn(S, H, generator=g), torch.randn(H, FF, generator=g), torch.randn(FF, H, generator=g)
    r = torch.randn(S, H, generator=g)
    z_ref, dx_ref, dw1_ref, dw2_ref = _reference(x, w1, w2, r)
    rows, cols = S // world, FF // world
    mine = slice(rank * rows, (rank + 1) * rows)
    my_cols = slice(rank * cols, (rank + 1) * cols)
    fusions = [FusionChoice(mode="none"), FusionChoice(mode="chunked", chunks=2),
               FusionChoice(mode="chunked", chunks=rows), FusionChoice(mode="ring"),
               FusionChoice(mode="chunked", chunks=2, own_first=False),
               FusionChoice(mode="chunked", chunks=2, sm_margin=8),
               FusionChoice(mode="ring", chunks=2),  # tapered pieces (the ring's default)
               FusionChoice(mode="ring", chunks=2, ring_all_gather=True)]  # all-gather exchange at world 2
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
        torch.testing.assert_close(col.weight.grad, dw1_ref[:, my_cols], rtol=1e-5, atol=1e-5, msg=what)
        torch.testing.assert_close(row.weight.grad, dw2_ref[my_cols], rtol=1e-5, atol=1e-5, msg=what)


def test_layer_gradients_equal_single_process_world2():
    run_world(_layers, 2)


def test_layer_gradients_equal_single_process_world4():
    run_world(_layers, 4)
