"""Column- and row-parallel linear layers with sequence parallelism, fused as each op is told.

Sequence parallelism (Megatron-LM): between the TP regions the activations are split by rows
(tokens) over the ranks. A column-parallel layer gathers them and multiplies by its column block
`W [K, N/tp]` (AG-GEMM); a row-parallel layer multiplies the full rows by its row block
`W [K/tp, N]` and reduce-scatters the sum back to row shards (GEMM-RS).

Backward is the dual: the input gradient of an AG-GEMM is a GEMM-RS of the output gradient with
`W^T`, and the input gradient of a GEMM-RS is an AG-GEMM of the output gradient with `W^T`; each
runs in the same fusion mode as the forward. Weight gradients come from the gathered operand:
`AG(x)^T @ dY` (column) and `Y^T @ AG(dY)` (row); the fused ops hand back the gathered tensor.
Backward ops are labelled `tpscope/<layer>.bwd/<op>`.

With `FusionChoice.bwd_overlap` (fused modes), each backward hides its collective under its own
weight gradient too: the column layer's weight-gradient GEMM runs while the input gradient is
reduce-scattered, and the row layer multiplies its own block of the weight gradient while the
output gradient is gathered. Unfused (`none`) never does: it is the baseline.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter
from tpscope.fusion.ops.resources import fusion_group
from tpscope.runfolder.fusion_choice import FusionChoice


class AllGatherMatmulFn(torch.autograd.Function):
    """y = AG(x_shard) @ w; dx = RS(dy @ w^T); dw = AG(x)^T @ dy."""

    @staticmethod
    def forward(ctx, x_shard, weight, group, fusion: FusionChoice, label: str):
        out, gathered = all_gather_matmul(
            x_shard,
            weight,
            group,
            mode=fusion.mode,
            chunks=fusion.chunks,
            label=label,
            return_gathered=True,
            own_first=fusion.own_first,
            sm_margin=fusion.sm_margin,
        )
        ctx.save_for_backward(gathered, weight)
        ctx.group, ctx.fusion, ctx.label = group, fusion, label
        return out

    @staticmethod
    def backward(ctx, grad_out):
        gathered, weight = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        fusion = ctx.fusion
        kw = {
            "mode": fusion.mode,
            "chunks": fusion.chunks,
            "label": f"{ctx.label}.bwd",
            "sm_margin": fusion.sm_margin,
            "ring_all_gather": fusion.ring_all_gather,
        }
        if fusion.overlaps_backward:
            grad_x, grad_w = matmul_reduce_scatter(
                grad_out, weight.t(), ctx.group, **kw, overlap=lambda: gathered.t() @ grad_out
            )
        else:
            grad_x = matmul_reduce_scatter(grad_out, weight.t(), ctx.group, **kw)
            grad_w = gathered.t() @ grad_out
        return grad_x, grad_w, None, None, None


class MatmulReduceScatterFn(torch.autograd.Function):
    """z = RS(y @ w); dy = AG(dz) @ w^T; dw = y^T @ AG(dz)."""

    @staticmethod
    def forward(ctx, y, weight, group, fusion: FusionChoice, label: str):
        out = matmul_reduce_scatter(
            y,
            weight,
            group,
            mode=fusion.mode,
            chunks=fusion.chunks,
            label=label,
            sm_margin=fusion.sm_margin,
            ring_all_gather=fusion.ring_all_gather,
        )
        ctx.save_for_backward(y, weight)
        ctx.group, ctx.fusion, ctx.label = group, fusion, label
        return out

    @staticmethod
    def backward(ctx, grad_out):
        y, weight = ctx.saved_tensors
        fusion = ctx.fusion
        kw = {
            "mode": fusion.mode,
            "chunks": fusion.chunks,
            "label": f"{ctx.label}.bwd",
            "own_first": fusion.own_first,
            "sm_margin": fusion.sm_margin,
        }
        if fusion.overlaps_backward:
            grad_y, grad_w = all_gather_matmul(
                grad_out.contiguous(), weight.t(), ctx.group, **kw, wgrad_lhs=y
            )
        else:
            grad_y, grad_gathered = all_gather_matmul(
                grad_out.contiguous(), weight.t(), ctx.group, **kw, return_gathered=True
            )
            grad_w = y.t() @ grad_gathered
        return grad_y, grad_w, None, None, None


def op_group(group: Any, fusion: FusionChoice) -> Any:
    """The communicator of a layer's op: its own, CTA-capped one for a fused mode that asks."""
    if fusion.comm_ctas and fusion.mode != "none":
        return fusion_group(group, fusion.comm_ctas)
    return group


class ColumnParallelLinear(nn.Module):
    """`[S/tp, in] -> [S, out/tp]`: all-gather the row shards, multiply by this rank's columns.

    The weight is stored `[in, out/tp]` (K-major) so the op multiplies without a transpose."""

    def __init__(
        self,
        in_features: int,
        out_local: int,
        *,
        fusion: FusionChoice,
        label: str,
        group: Any = None,
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_local))
        self.fusion, self.label, self.group = fusion, label, op_group(group, fusion)

    def forward(self, x_shard: torch.Tensor) -> torch.Tensor:
        return AllGatherMatmulFn.apply(x_shard, self.weight, self.group, self.fusion, self.label)


class RowParallelLinear(nn.Module):
    """`[S, in/tp] -> [S/tp, out]`: multiply by this rank's rows, reduce-scatter the sum by rows."""

    def __init__(
        self,
        in_local: int,
        out_features: int,
        *,
        fusion: FusionChoice,
        label: str,
        group: Any = None,
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_local, out_features))
        self.fusion, self.label, self.group = fusion, label, op_group(group, fusion)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return MatmulReduceScatterFn.apply(y, self.weight, self.group, self.fusion, self.label)


def init_full_weight(
    in_features: int, out_features: int, generator: torch.Generator | None, std: float
) -> torch.Tensor:
    """A full `[in, out]` weight drawn from N(0, std^2); every rank draws the same one and keeps
    its block, so a TP model and its single-process reference start equal."""
    device = generator.device if generator is not None else "cpu"
    return torch.randn((in_features, out_features), generator=generator, device=device) * std
