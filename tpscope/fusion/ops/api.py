"""The fused tensor-parallel ops: all-gather then GEMM, and GEMM then reduce-scatter.

`all_gather_matmul(x_shard [S/tp, K], weight [K, N_local]) -> [S, N_local]` equals
`all_gather(x_shard) @ weight` with rows in rank order; `matmul_reduce_scatter(y [S, K_local],
weight [K_local, N]) -> [S/tp, N]` equals this rank's row block of `sum_ranks(y @ weight)`.

Modes: one module each, every one with the same `ag(x, w, AgCall)` and `rs(y, w, RsCall)`, and
ALL_GATHER_MATMUL / MATMUL_REDUCE_SCATTER the table from mode to them: `none` (unfused),
`chunked`, `ring`, `symm_mem` (torch's fused ops: symm), `copy_engine` (peer copies on the copy
engines beside the GEMMs, no SM for the transfer), `host_staged` (the same off peer access,
staged through shared host memory). Every op is forward-only (no autograd graph);
tpscope.fusion.model.layers wraps them in autograd functions. Each call is labelled
`tpscope/<label>/ag_gemm` or `tpscope/<label>/gemm_rs`, and each chunk `.../chunk<i>` (docs/runtime.md).

Two more inputs let a layer's backward hide its collective under work it has anyway:
`all_gather_matmul(..., wgrad_lhs=y)` also returns the weight gradient `y^T @ AG(x)`, and the
chunked mode multiplies this rank's own block of it beside the first transfer;
`matmul_reduce_scatter(..., overlap=fn)` runs `fn` (the weight-gradient GEMM) on the compute stream
after the reduce-scatter is issued and before it is waited for. `sm_margin` leaves that many SMs
free to the collective in the GEMMs that run beside a transfer (tpscope.fusion.ops.resources);
`copy_engine` ignores it (its transfers take no SM) and overlaps both weight gradients as chunked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import record_function

from tpscope.fusion.ops import chunked, copy_engine, host_staged, ring, symm, unfused
from tpscope.fusion.ops.common import (
    AG_GEMM,
    GEMM_RS,
    AgCall,
    RsCall,
    group_size_rank,
    resolve_taper,
)
from tpscope.fusion.ops.validate import check_all_gather_matmul, check_matmul_reduce_scatter
from tpscope.runfolder.fusion_choice import Mode

AgImpl = Callable[[torch.Tensor, torch.Tensor, AgCall], tuple[Any, Any, Any]]
RsImpl = Callable[[torch.Tensor, torch.Tensor, RsCall], tuple[Any, Any]]

ALL_GATHER_MATMUL: dict[str, AgImpl] = {
    Mode.NONE.value: unfused.ag,
    Mode.CHUNKED.value: chunked.ag,
    Mode.RING.value: ring.ag,
    Mode.SYMM_MEM.value: symm.ag,
    Mode.COPY_ENGINE.value: copy_engine.ag,
    Mode.HOST_STAGED.value: host_staged.ag,
}
"""Mode -> all_gather_matmul's implementation: (out, gathered or None, weight gradient or None)."""

MATMUL_REDUCE_SCATTER: dict[str, RsImpl] = {
    Mode.NONE.value: unfused.rs,
    Mode.CHUNKED.value: chunked.rs,
    Mode.RING.value: ring.rs,
    Mode.SYMM_MEM.value: symm.rs,
    Mode.COPY_ENGINE.value: copy_engine.rs,
    Mode.HOST_STAGED.value: host_staged.rs,
}
"""Mode -> matmul_reduce_scatter's implementation: (out, the `overlap` result or None)."""


def _mode_value(mode: Any) -> str:
    return mode.value if isinstance(mode, Mode) else str(mode)


def all_gather_matmul(
    x_shard: torch.Tensor,
    weight: torch.Tensor,
    group: Any = None,
    *,
    mode: str = "chunked",
    chunks: int = 4,
    label: str = "op",
    return_gathered: bool = False,
    own_first: bool = True,
    sm_margin: int = 0,
    wgrad_lhs: torch.Tensor | None = None,
    copy_push: bool = True,
    taper: bool | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`all_gather(x_shard) @ weight`, fused as `mode` says; with `return_gathered`, also the
    gathered input `[S, K]` (the weight gradient of a column-parallel layer needs it); with
    `wgrad_lhs` (`[S, M]`), also `wgrad_lhs^T @ gathered` (`[M, K]`, the weight gradient of a
    row-parallel layer) instead of the gathered input.
    `own_first` (chunked): multiply the local shard while the first chunks travel.
    `sm_margin`: SMs the GEMMs beside a transfer leave to it (0: all SMs).
    `copy_push` (copy_engine): each rank pushes its shard into the peers' buffers (default) or
    the peers pull it (tpscope.fusion.ops.copy_engine).
    `taper` (chunked, ring; chunks > 1): the last piece, whose GEMM follows the last transfer,
    is half an even one (tpscope.fusion.ops.schedule); None: the mode's default (TAPER_BY_DEFAULT)."""
    mode = _mode_value(mode)
    taper = resolve_taper(mode, taper)
    tp, rank = group_size_rank(group)
    check_all_gather_matmul(x_shard, weight, tp, mode, chunks)
    if wgrad_lhs is not None and wgrad_lhs.shape[0] != tp * x_shard.shape[0]:
        raise ValueError(
            f"wgrad_lhs has {wgrad_lhs.shape[0]} rows, the gathered input {tp * x_shard.shape[0]}"
        )
    x_shard = x_shard.contiguous()
    call = AgCall(
        group=group,
        tp=tp,
        rank=rank,
        chunks=chunks,
        label=label,
        need_gathered=return_gathered or wgrad_lhs is not None,
        return_gathered=return_gathered,
        own_first=own_first,
        sm_margin=sm_margin,
        wgrad_lhs=wgrad_lhs,
        copy_push=copy_push,
        taper=taper,
    )
    grad_w = None
    with torch.no_grad(), record_function(f"tpscope/{label}/{AG_GEMM}"):
        if tp == 1:
            out, gathered = x_shard @ weight, x_shard
        else:
            out, gathered, grad_w = ALL_GATHER_MATMUL[mode](x_shard, weight, call)
        if wgrad_lhs is not None and grad_w is None:
            grad_w = wgrad_lhs.t() @ gathered
    if wgrad_lhs is not None:
        return out, grad_w
    return (out, gathered) if return_gathered else out


def matmul_reduce_scatter(
    y: torch.Tensor,
    weight: torch.Tensor,
    group: Any = None,
    *,
    mode: str = "chunked",
    chunks: int = 4,
    label: str = "op",
    sm_margin: int = 0,
    overlap: Callable[[], torch.Tensor] | None = None,
    taper: bool | None = None,
    ring_all_gather: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """This rank's row block of `sum over ranks of y @ weight`, fused as `mode` says. With
    `overlap`, also `overlap()`: in `chunked` it runs while the last chunks are reduced (other
    modes run it after; `copy_engine` beside its pushes); unfused (`none`) never overlaps, being
    the baseline. `taper` (chunked, ring; chunks > 1): the first piece, whose GEMM precedes the
    first transfer, is half an even one (tpscope.fusion.ops.schedule; None: TAPER_BY_DEFAULT).
    `ring_all_gather` (ring, two ranks): each piece is swapped by an all-gather instead of a
    send/recv pair."""
    mode = _mode_value(mode)
    taper = resolve_taper(mode, taper)
    tp, rank = group_size_rank(group)
    check_matmul_reduce_scatter(y, weight, tp, mode, chunks)
    y = y.contiguous()
    call = RsCall(
        group=group,
        tp=tp,
        rank=rank,
        chunks=chunks,
        label=label,
        sm_margin=sm_margin,
        overlap=overlap,
        taper=taper,
        ring_all_gather=ring_all_gather,
    )
    extra = None
    with torch.no_grad(), record_function(f"tpscope/{label}/{GEMM_RS}"):
        if tp == 1:
            out = y @ weight
        else:
            out, extra = MATMUL_REDUCE_SCATTER[mode](y, weight, call)
        if overlap is not None and extra is None:
            extra = overlap()
    return out if overlap is None else (out, extra)
