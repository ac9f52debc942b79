"""Mode `copy_engine`: the transfers of AG-GEMM and GEMM-RS done by the GPU's copy engines.

NCCL moves data with kernels: on NVLink its CTAs take SMs from the GEMM beside it (the bench's
`gemm||comm` rows: an independent GEMM and an all-gather launched together lose most of the
collective's time to that contention, docs/benchmarks.md). A copy engine (DMA) moves the same
bytes over the peer link without an SM. This mode keeps every rank's shard (AG) or its partial
sums for the other ranks (RS) in torch's symmetric memory, one buffer per rank mapped into every
peer, and moves them with `copy_` between peer-mapped buffers, which CUDA runs on a copy engine:

- AG-GEMM: the compute stream multiplies the own shard at once; meanwhile the side stream copies
  the shard into the rank's buffer, waits at a barrier for every rank's, pulls each peer's shard
  (in `chunks` pieces) and copies the own one into the gathered input; the compute stream
  multiplies each pulled piece as soon as it has landed. (The barriers are one-block kernels; on
  an H200 they ran beside cuBLAS's GEMMs, sample_traces/h200x2-nvlink-copy_engine.)
- GEMM-RS: the compute stream multiplies the rows destined to each peer first and the side stream
  pushes each result into that peer's buffer (slot of the sender); the rank's own rows are
  multiplied meanwhile; a barrier says all pushes have landed, and the slots are added in.

Like `symm_mem`, this uses CUDA peer access whatever NCCL is told, so it belongs to the `nvlink`
regime; `auto` offers it there only (BENCHMARKS.md). CUDA only: on CPU it refuses with a clear
error (tpscope.fusion.validate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import record_function

from tpscope.fusion import compat
from tpscope.fusion.ops import add_peer_wgrad
from tpscope.fusion.streams import CommStream

TAIL_FILL = True
"""Whether the GEMMs of the other ranks' rows run on the `gemm` side stream by default."""

_VIEWS: dict[str, tuple[Any, Any, dict[tuple, torch.Tensor]]] = {}
"""Per group: the workspace's storage tensor, its handle, and the tensors made over it."""


def _workspace(group: Any, nbytes: int):
    """This group's symmetric-memory workspace of at least `nbytes` (collective on first use and
    whenever it must grow: every rank asks for the same sizes in the same order), as (handle,
    views). The handle and views are kept while torch keeps the same storage (torch's symm_mem
    ops share it and may grow it too); looking them up again costs the CPU tens of
    microseconds per op, which the GPU waits for at the start of an op."""
    import torch.distributed._symmetric_memory as symm

    pg = group if group is not None else dist.group.WORLD
    name = compat.enable_symm_mem(pg)
    storage = getattr(symm, "_group_name_to_workspace_tensor", {}).get(name)
    size = 0 if storage is None else storage.numel() * storage.element_size()
    cached = _VIEWS.get(name)
    if cached is None or storage is None or cached[0] is not storage or size < nbytes:
        if storage is not None and storage.is_cuda and size < nbytes:
            # growing frees the old buffers. Every peer's copies from or into this rank's buffer
            # ended before the last op's closing barrier, which this rank's streams waited for:
            # once this GPU is idle, nothing uses them any more (a few times per run, at the start)
            torch.cuda.synchronize(storage.device)
        hdl = symm.get_symm_mem_workspace(name, min_size=nbytes)
        storage = getattr(symm, "_group_name_to_workspace_tensor", {}).get(name)
        cached = _VIEWS[name] = (storage, hdl, {})
    return cached[1:]


def _buffer(ws, rank: int, shape: tuple[int, ...], dtype: torch.dtype, offset: int = 0) -> torch.Tensor:
    """`rank`'s buffer of workspace `ws` (from _workspace) as a tensor, made once per view."""
    hdl, views = ws
    key = (rank, tuple(shape), dtype, offset)
    if key not in views:
        views[key] = hdl.get_buffer(rank, tuple(shape), dtype, storage_offset=offset)
    return views[key]


def ag_copy_engine(x: torch.Tensor, w: torch.Tensor, group: Any, tp: int, rank: int, chunks: int,
                   label: str, wgrad_lhs: torch.Tensor | None = None, tail_fill: bool = TAIL_FILL):
    """`all_gather(x) @ w` with copy-engine pulls; returns (out, gathered, grad_w or None).
    With `wgrad_lhs`, also `wgrad_lhs^T @ gathered`, whose own block runs beside the pulls.
    With `tail_fill`, the pulled pieces' GEMMs run on the `gemm` side stream (module docstring)."""
    s_local, k = x.shape
    rows = s_local // chunks
    ws = _workspace(group, x.numel() * x.element_size())
    hdl = ws[0]
    out = x.new_empty(tp * s_local, w.shape[1])
    gathered = x.new_empty(tp * s_local, k)
    side = CommStream(x.device)
    tail = CommStream(x.device, "gemm") if tail_fill else None
    own = slice(rank * s_local, (rank + 1) * s_local)
    side.follow_compute()
    if tail is not None:
        tail.follow_compute()  # the inputs are ready; not the own GEMM, which it may overlap
    with side.issue():
        # side stream, copy engine: nothing here delays the own shard's GEMM
        _buffer(ws, rank, x.shape, x.dtype).copy_(x)
        hdl.barrier(channel=0)  # every rank's shard is in its buffer
    torch.mm(x, w, out=out[own])  # launched before the pulls are set up: the GPU has work meanwhile
    landed = []
    with side.issue():
        with record_function(f"tpscope/{label}/ag_gemm/pull"):
            for step in range(1, tp):
                src = (rank + step) % tp
                remote = _buffer(ws, src, x.shape, x.dtype)
                for c in range(chunks):
                    start = src * s_local + c * rows
                    gathered[start : start + rows].copy_(remote[c * rows : (c + 1) * rows])
                    landed.append((start, side.record()))
        gathered[own].copy_(x)
        hdl.barrier(channel=1)  # every peer has read this rank's buffer: it may be reused
    grad_w = None if wgrad_lhs is None else wgrad_lhs[own].t() @ x
    for start, event in landed:
        if tail is None:
            side.compute_waits(event)
            torch.mm(gathered[start : start + rows], w, out=out[start : start + rows])
        else:
            tail.waits(event)
            with tail.issue():
                torch.mm(gathered[start : start + rows], w, out=out[start : start + rows])
    if grad_w is not None:
        for _, event in landed:
            side.compute_waits(event)
        add_peer_wgrad(grad_w, wgrad_lhs, gathered, tp, rank)
    side.join()
    if tail is not None:
        tail.join()
    return out, gathered, grad_w


def rs_copy_engine(y: torch.Tensor, w: torch.Tensor, group: Any, tp: int, rank: int, chunks: int,
                   label: str, overlap: Callable[[], torch.Tensor] | None = None,
                   tail_fill: bool = TAIL_FILL):
    """This rank's row block of `sum_ranks(y @ w)` with copy-engine pushes; returns (out, extra)
    where `extra = overlap()` ran beside the pushes (None without `overlap`). With `tail_fill`,
    the peers' rows are multiplied on the `gemm` side stream, ahead of the own rows' GEMM on the
    compute stream (module docstring)."""
    s_local = y.shape[0] // tp
    rows = s_local // chunks
    n = w.shape[1]
    slot = s_local * n  # elements of one sender's slot in a receiver's buffer
    ws = _workspace(group, tp * slot * y.element_size())
    hdl = ws[0]
    side = CommStream(y.device)
    peers = CommStream(y.device, "gemm") if tail_fill else side
    hdl.barrier(channel=0)  # every rank has added in its slots of the last call: they are free
    if tail_fill:
        peers.follow_compute()
    for step in range(1, tp):
        dst = (rank + step) % tp
        for c in range(chunks):
            start = dst * s_local + c * rows
            if tail_fill:
                with peers.issue():
                    partial = y[start : start + rows] @ w
                side.follow(peers)
            else:
                partial = y[start : start + rows] @ w
                side.follow_compute()
            with side.issue(), record_function(f"tpscope/{label}/gemm_rs/push"):
                remote = _buffer(ws, dst, (s_local, n), y.dtype, rank * slot)
                remote[c * rows : (c + 1) * rows].copy_(partial)
                # the caching allocator must not hand `partial` out again before the copy has read it
                if partial.is_cuda:
                    partial.record_stream(torch.cuda.current_stream())
    with side.issue():
        hdl.barrier(channel=1)  # every push into every rank has landed
    out = y[rank * s_local : (rank + 1) * s_local] @ w
    extra = overlap() if overlap is not None else None
    side.join()
    if tail_fill:
        peers.join()
    for src in range(tp):
        if src != rank:
            out.add_(_buffer(ws, rank, (s_local, n), y.dtype, src * slot))
    return out, extra
