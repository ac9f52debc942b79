"""The fused tensor-parallel ops: all-gather then GEMM, and GEMM then reduce-scatter.

`all_gather_matmul(x_shard [S/tp, K], weight [K, N_local]) -> [S, N_local]` equals
`all_gather(x_shard) @ weight` with rows in rank order; `matmul_reduce_scatter(y [S, K_local],
weight [K_local, N]) -> [S/tp, N]` equals this rank's row block of `sum_ranks(y @ weight)`.

Modes: `none` (the collective and the GEMM one after the other), `chunked` (k
collectives of row chunks issued on a side stream, pipelined with k GEMMs; the reduce-scatter's
chunks interleave rows so that each rank's shard stays contiguous), `ring` (tpscope.fusion.ring),
`symm_mem` (torch's fused ops, tpscope.fusion.symm), `copy_engine` (peer copies on the copy
engines beside the GEMMs, no SM for the transfer: tpscope.fusion.copy_engine). Every op is forward-only (no autograd graph);
tpscope.fusion.layers wraps them in autograd functions. Each call is labelled
`tpscope/<label>/ag_gemm` or `tpscope/<label>/gemm_rs`, and each chunk `.../chunk<i>` (docs/runtime.md).

Two more inputs let a layer's backward hide its collective under work it has anyway:
`all_gather_matmul(..., wgrad_lhs=y)` also returns the weight gradient `y^T @ AG(x)`, and the
chunked mode multiplies this rank's own block of it beside the first transfer;
`matmul_reduce_scatter(..., overlap=fn)` runs `fn` (the weight-gradient GEMM) on the compute stream
after the reduce-scatter is issued and before it is waited for. `sm_margin` leaves that many SMs
free to the collective in the GEMMs that run beside a transfer (tpscope.fusion.resources);
`copy_engine` ignores it (its transfers take no SM) and overlaps both weight gradients as chunked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import record_function

from tpscope.fusion import compat
from tpscope.fusion.resources import gemm_sm_margin
from tpscope.fusion.schedule import chunk_bounds
from tpscope.fusion.streams import CommStream, wait_all
from tpscope.fusion.validate import check_all_gather_matmul, check_matmul_reduce_scatter
from tpscope.runfolder.fusion_choice import Mode

AG_GEMM = "ag_gemm"
GEMM_RS = "gemm_rs"

TAPER_BY_DEFAULT = {Mode.RING.value: True, Mode.CHUNKED.value: False}
"""Whether a mode tapers its pieces unless told (tpscope.fusion.schedule). Measured side by side
on shm (docs/benchmarks.md, "pushed copies, the GPU fed ahead, tapered pieces"): the ring was faster tapered in every case, chunked
as fast or slower."""


def resolve_taper(mode: str, taper: bool | None) -> bool:
    """The taper `mode` runs with: `taper`, or the mode's default (TAPER_BY_DEFAULT) for None."""
    return TAPER_BY_DEFAULT.get(mode, False) if taper is None else taper


def group_size_rank(group: Any) -> tuple[int, int]:
    """(tp, rank in group); refuses an uninitialized torch.distributed with a clear error."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialized: call init_process_group first")
    return dist.get_world_size(group), dist.get_rank(group)


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
    the peers pull it (tpscope.fusion.copy_engine).
    `taper` (chunked, ring; chunks > 1): the last piece, whose GEMM follows the last transfer,
    is half an even one (tpscope.fusion.schedule); None: the mode's default (TAPER_BY_DEFAULT)."""
    mode = _mode_value(mode)
    taper = resolve_taper(mode, taper)
    tp, rank = group_size_rank(group)
    check_all_gather_matmul(x_shard, weight, tp, mode, chunks)
    if wgrad_lhs is not None and wgrad_lhs.shape[0] != tp * x_shard.shape[0]:
        raise ValueError(f"wgrad_lhs has {wgrad_lhs.shape[0]} rows, the gathered input {tp * x_shard.shape[0]}")
    x_shard = x_shard.contiguous()
    need_gathered = return_gathered or wgrad_lhs is not None
    grad_w = None
    with torch.no_grad(), record_function(f"tpscope/{label}/{AG_GEMM}"):
        if tp == 1:
            out, gathered = x_shard @ weight, x_shard
        elif mode == Mode.NONE.value:
            out, gathered = _ag_none(x_shard, weight, group, tp)
        elif mode == Mode.CHUNKED.value:
            out, gathered, grad_w = _ag_chunked(x_shard, weight, group, tp, rank, chunks, label,
                                                need_gathered, own_first, sm_margin, wgrad_lhs, taper)
        elif mode == Mode.RING.value:
            from tpscope.fusion.ring import ag_ring

            with gemm_sm_margin(sm_margin, x_shard.device):
                out, gathered = ag_ring(x_shard, weight, group, tp, rank, label, need_gathered, chunks, taper)
        elif mode == Mode.COPY_ENGINE.value:
            from tpscope.fusion.copy_engine import ag_copy_engine

            out, gathered, grad_w = ag_copy_engine(x_shard, weight, group, tp, rank, chunks, label, wgrad_lhs,
                                                   push=copy_push, need_gathered=return_gathered)
        else:
            from tpscope.fusion.symm import ag_symm_mem

            out, gathered = ag_symm_mem(x_shard, weight, group)
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
    first transfer, is half an even one (tpscope.fusion.schedule; None: TAPER_BY_DEFAULT).
    `ring_all_gather` (ring, two ranks): each piece is swapped by an all-gather instead of a
    send/recv pair."""
    mode = _mode_value(mode)
    taper = resolve_taper(mode, taper)
    tp, rank = group_size_rank(group)
    check_matmul_reduce_scatter(y, weight, tp, mode, chunks)
    y = y.contiguous()
    extra = None
    with torch.no_grad(), record_function(f"tpscope/{label}/{GEMM_RS}"):
        if tp == 1:
            out = y @ weight
        elif mode == Mode.NONE.value:
            out = _rs_none(y, weight, group, tp)
        elif mode == Mode.CHUNKED.value:
            out, extra = _rs_chunked(y, weight, group, tp, chunks, label, sm_margin, overlap, taper)
        elif mode == Mode.RING.value:
            from tpscope.fusion.ring import rs_ring

            with gemm_sm_margin(sm_margin, y.device):
                out = rs_ring(y, weight, group, tp, rank, label, chunks, taper, ring_all_gather)
        elif mode == Mode.COPY_ENGINE.value:
            from tpscope.fusion.copy_engine import rs_copy_engine

            out, extra = rs_copy_engine(y, weight, group, tp, rank, chunks, label, overlap)
        else:
            from tpscope.fusion.symm import rs_symm_mem

            out = rs_symm_mem(y, weight, group)
        if overlap is not None and extra is None:
            extra = overlap()
    return out if overlap is None else (out, extra)


def _ag_none(x: torch.Tensor, w: torch.Tensor, group: Any, tp: int):
    gathered = x.new_empty(tp * x.shape[0], x.shape[1])
    compat.all_gather_single(gathered, x, group=group)
    return gathered @ w, gathered


def _ag_chunked(x, w, group, tp: int, rank: int, chunks: int, label: str, return_gathered: bool,
                own_first: bool, sm_margin: int = 0, wgrad_lhs: torch.Tensor | None = None,
                taper: bool = False):
    """Chunk c gathers rows [a_c, b_c) of every rank's shard (tpscope.fusion.schedule; `taper`
    halves the last), then one GEMM per source rank writes straight into that rank's rows of the
    output (no reordering copy). Every chunk's collective is issued first, so that they run back
    to back. With `own_first` the local shard's GEMM (and its block of the weight gradient,
    given `wgrad_lhs`) runs first, beside the first transfer, and chunks cover peers only. GEMMs
    that run while a later chunk travels leave `sm_margin` SMs free. The gathered input is
    assembled on the side stream as each chunk lands (not by one copy at the end, which the
    compute stream would wait for), after every collective is queued (not between them)."""
    s_local, k = x.shape
    bounds = chunk_bounds(s_local, chunks, "last" if taper else "")
    out = x.new_empty(tp * s_local, w.shape[1])
    bufs = [x.new_empty(tp * (b - a), k) for a, b in bounds]  # alive until every reader is done
    comm = CommStream(x.device)
    comm.follow_compute()
    own = slice(rank * s_local, (rank + 1) * s_local)
    gathered = x.new_empty(tp * s_local, k) if return_gathered else None
    works = []
    with comm.issue():
        for c, (a, b) in enumerate(bounds):
            with record_function(f"tpscope/{label}/{AG_GEMM}/chunk{c}"):
                works.append(compat.all_gather_single(bufs[c], x[a:b], group=group, async_op=True))
        if gathered is not None:
            gathered[own].copy_(x)
    grad_w = None
    if own_first:
        with gemm_sm_margin(sm_margin, x.device):
            torch.mm(x, w, out=out[own])
            if wgrad_lhs is not None:
                grad_w = wgrad_lhs[own].t() @ x
    for c, (a, b) in enumerate(bounds):
        rows, buf = b - a, bufs[c]
        with record_function(f"tpscope/{label}/{AG_GEMM}/chunk{c}"):
            wait_all([works[c]], comm)
            with gemm_sm_margin(sm_margin if c < chunks - 1 else 0, x.device):
                for src in range(tp):
                    if own_first and src == rank:
                        continue
                    torch.mm(buf[src * rows : (src + 1) * rows], w, out=out[src * s_local + a : src * s_local + b])
            if gathered is not None:
                with comm.issue():  # beside the next GEMMs
                    for src in range(tp):
                        if src != rank:
                            gathered[src * s_local + a : src * s_local + b].copy_(buf[src * rows : (src + 1) * rows])
    comm.join()
    if grad_w is not None:
        add_peer_wgrad(grad_w, wgrad_lhs, gathered, tp, rank)
    return out, gathered, grad_w


def add_peer_wgrad(grad_w: torch.Tensor, wgrad_lhs: torch.Tensor, gathered: torch.Tensor, tp: int,
                   rank: int) -> None:
    """Add the peers' blocks `wgrad_lhs[b]^T @ gathered[b]` to `grad_w`, which holds the own
    block's (computed beside the first transfer)."""
    s_local = gathered.shape[0] // tp
    for src in range(tp):
        if src != rank:
            block = slice(src * s_local, (src + 1) * s_local)
            grad_w.addmm_(wgrad_lhs[block].t(), gathered[block])


def _rs_none(y: torch.Tensor, w: torch.Tensor, group: Any, tp: int) -> torch.Tensor:
    partial = y @ w
    out = partial.new_empty(y.shape[0] // tp, w.shape[1])
    compat.reduce_scatter_single(out, partial, group=group)
    return out


def _rs_chunked(y, w, group, tp: int, chunks: int, label: str, sm_margin: int = 0,
                overlap: Callable[[], torch.Tensor] | None = None, taper: bool = False):
    """Chunk c computes rows [a_c, b_c) of every rank's block (tpscope.fusion.schedule; `taper`
    halves the first, whose GEMM no transfer hides) into one buffer, rank-major, and
    reduce-scatters it: rank q receives rows [a_c, b_c) of its own block, contiguous. GEMMs after
    the first run beside the chunks before them and leave `sm_margin` SMs free; `overlap()` runs
    after the last GEMM, beside the last chunks' transfers."""
    s_local = y.shape[0] // tp
    n = w.shape[1]
    out = y.new_empty(s_local, n)
    comm = CommStream(y.device)
    works = []
    extra = None
    for c, (a, b) in enumerate(chunk_bounds(s_local, chunks, "first" if taper else "")):
        rows = b - a
        with record_function(f"tpscope/{label}/{GEMM_RS}/chunk{c}"):
            partial = y.new_empty(tp * rows, n)
            with gemm_sm_margin(sm_margin if c > 0 else 0, y.device):
                if chunks == 1:  # every rank's block at once: one GEMM, as unfused
                    torch.mm(y, w, out=partial)
                else:
                    for dst in range(tp):
                        torch.mm(y[dst * s_local + a : dst * s_local + b], w, out=partial[dst * rows : (dst + 1) * rows])
            comm.follow_compute()
            with comm.issue():
                works.append(
                    compat.reduce_scatter_single(out[a:b], partial, group=group, async_op=True)
                )
    if overlap is not None:
        with gemm_sm_margin(sm_margin, y.device):
            extra = overlap()
    wait_all(works, comm)
    return out, extra
