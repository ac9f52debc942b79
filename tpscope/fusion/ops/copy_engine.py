"""Mode `copy_engine`: the transfers of AG-GEMM and GEMM-RS done by the GPU's copy engines.

NCCL moves data with kernels: on NVLink its CTAs take SMs from the GEMM beside it (the bench's
`gemm||comm` rows: an independent GEMM and an all-gather launched together lose most of the
collective's time to that contention, docs/benchmarks.md). A copy engine (DMA) moves the same
bytes over the peer link without an SM. This mode keeps every rank's shard (AG) or its partial
sums for the other ranks (RS) in torch's symmetric memory, one buffer per rank mapped into every
peer, and moves them with `copy_` between peer-mapped buffers, which CUDA runs on a copy engine:

- AG-GEMM (push): the side stream copies the rank's shard straight into every peer's buffer (in
  `chunks` pieces, each closed by a barrier saying that every rank's piece has landed) while
  the compute stream multiplies the own shard; then it multiplies each peer's shard where it
  landed, and the side stream assembles the gathered input (kept for the weight gradient) in
  the GEMMs' last waves. The AG buffer is a symmetric tensor of its own with two regions used
  in turn, so no barrier comes before the pushes: a call writes the region that the call
  before last read, and every rank had finished those reads before its pushes of the last
  call (its side stream waits for its compute stream first), which the last call's closing
  barrier has seen. Pulling (`push=False`: the shard copied into the own buffer, a barrier,
  the peers pull it) waited for that copy, which needs SMs that the own GEMM holds
  (docs/benchmarks.md); it stays for the side-by-side bench.
- GEMM-RS: the compute stream multiplies the rows destined to each peer first and the side stream
  pushes each result into that peer's buffer (slot of the sender); the rank's own rows are
  multiplied meanwhile; a barrier says all pushes have landed, and the slots are added in.

Like `symm_mem`, this uses CUDA peer access whatever NCCL is told, so it belongs to the `nvlink`
regime; `auto` offers it there only (docs/benchmarks.md). CUDA only: on CPU it refuses with a clear
error (tpscope.fusion.ops.validate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import record_function

from tpscope.fusion.ops import compat
from tpscope.fusion.ops.common import AgCall, RsCall, add_peer_wgrad
from tpscope.fusion.ops.streams import CommStream

_VIEWS: dict[str, tuple[Any, Any, dict[tuple, torch.Tensor]]] = {}
"""Per group: the workspace's storage tensor, its handle, and the tensors made over it."""


def _group_name(group: Any) -> str:
    """The name of `group` (None: the default group), symmetric memory enabled on it."""
    return compat.enable_symm_mem(group if group is not None else dist.group.WORLD)


def _workspace(group: Any, nbytes: int):
    """This group's symmetric-memory workspace of at least `nbytes` (collective on first use and
    whenever it must grow: every rank asks for the same sizes in the same order), as (handle,
    views). The handle and views are kept while torch keeps the same storage (torch's symm_mem
    ops share it and may grow it too); looking them up again costs the CPU tens of
    microseconds per op, which the GPU waits for at the start of an op."""
    import torch.distributed._symmetric_memory as symm

    name = _group_name(group)
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


_AG_BUFFERS: dict[str, list] = {}
"""Per group: [symmetric tensor, its handle, views made over it, AG-GEMM calls so far]."""


def _ag_buffers(group: Any, nbytes: int, device: torch.device):
    """This group's two AG-GEMM regions of `nbytes` each, as (handle, views, region 0 or 1 for
    this call). A symmetric tensor of its own, not torch's workspace (which the GEMM-RS slots
    and torch's symm_mem ops share), rendezvoused on first use and whenever it must grow
    (collective: every rank makes the same calls in the same order)."""
    import torch.distributed._symmetric_memory as symm

    name = _group_name(group)
    entry = _AG_BUFFERS.get(name)
    if entry is None or entry[0].numel() < 2 * nbytes:
        if entry is not None:
            # the old regions' last readers and writers ran before this GPU's last barrier
            torch.cuda.synchronize(device)
        tensor = symm.empty(2 * nbytes, dtype=torch.uint8, device=device)
        entry = _AG_BUFFERS[name] = [
            tensor,
            symm.rendezvous(tensor, name),
            {},
            0 if entry is None else entry[3],
        ]
    entry[3] += 1
    return entry[1], entry[2], entry[3] % 2


def _buffer(
    ws, rank: int, shape: tuple[int, ...], dtype: torch.dtype, offset: int = 0
) -> torch.Tensor:
    """`rank`'s buffer of workspace `ws` (from _workspace) as a tensor, made once per view."""
    hdl, views = ws
    key = (rank, tuple(shape), dtype, offset)
    if key not in views:
        views[key] = hdl.get_buffer(rank, tuple(shape), dtype, storage_offset=offset)
    return views[key]


def ag_copy_engine(
    x: torch.Tensor,
    w: torch.Tensor,
    group: Any,
    tp: int,
    rank: int,
    chunks: int,
    label: str,
    wgrad_lhs: torch.Tensor | None = None,
    push: bool = True,
    need_gathered: bool = True,
):
    """`all_gather(x) @ w` with copy-engine transfers; returns (out, gathered or None, grad_w or
    None). With `wgrad_lhs`, also `wgrad_lhs^T @ gathered`, whose own block runs beside the
    transfers. `push` (default): each rank copies its shard into every peer's buffer; else each
    rank copies it into its own buffer and the peers pull it (module docstring)."""
    if not push:
        return _ag_pull(x, w, group, tp, rank, chunks, label, wgrad_lhs)
    s_local, k = x.shape
    rows = s_local // chunks
    hdl, views, region = _ag_buffers(group, tp * x.numel() * x.element_size(), x.device)
    out = x.new_empty(tp * s_local, w.shape[1])
    side = CommStream(x.device)
    own = slice(rank * s_local, (rank + 1) * s_local)

    def slot(
        owner: int, src: int
    ) -> torch.Tensor:  # `src`'s shard in this call's region of `owner`
        return _buffer((hdl, views), owner, x.shape, x.dtype, (region * tp + src) * x.numel())

    # No barrier before the pushes: they write the region that the call before last read, and
    # every rank had finished reading it before it pushed in the last call, whose closing barrier
    # this side stream has passed (the module docstring). A first barrier here, even on the
    # compute stream, cost 4-23 us per call on the critical path (docs/benchmarks.md).
    side.follow_compute()
    landed = []
    with side.issue(), record_function(f"tpscope/{label}/ag_gemm/push"):
        for c in range(chunks):
            piece = slice(c * rows, (c + 1) * rows)
            for step in range(1, tp):
                slot((rank + step) % tp, rank)[piece].copy_(x[piece])  # peer copy: a copy engine
            hdl.barrier(channel=c)  # every rank's piece c has landed in every buffer
            landed.append(side.record())
    torch.mm(x, w, out=out[own])
    grad_w = None if wgrad_lhs is None else wgrad_lhs[own].t() @ x
    for c, event in enumerate(landed):
        side.compute_waits(event)
        for step in range(1, tp):
            src = (rank + step) % tp
            start = src * s_local + c * rows
            torch.mm(slot(rank, src)[c * rows : (c + 1) * rows], w, out=out[start : start + rows])
    if grad_w is not None:  # the peers' blocks straight from the slots
        for src in range(tp):
            if src != rank:
                grad_w.addmm_(wgrad_lhs[src * s_local : (src + 1) * s_local].t(), slot(rank, src))
    gathered = None
    if need_gathered:
        gathered = x.new_empty(tp * s_local, k)
        with side.issue():  # beside the peers' GEMMs, which read the same slots
            gathered[own].copy_(x)
            for src in range(tp):
                if src != rank:
                    gathered[src * s_local : (src + 1) * s_local].copy_(slot(rank, src))
    side.join()
    return out, gathered, grad_w


def _ag_pull(
    x: torch.Tensor,
    w: torch.Tensor,
    group: Any,
    tp: int,
    rank: int,
    chunks: int,
    label: str,
    wgrad_lhs: torch.Tensor | None = None,
):
    """ag_copy_engine with pulls: the shard's copy into the own buffer, a barrier, then each
    rank pulls its peers' shards (the design before push, kept for the side-by-side bench)."""
    s_local, k = x.shape
    rows = s_local // chunks
    ws = _workspace(group, x.numel() * x.element_size())
    hdl = ws[0]
    out = x.new_empty(tp * s_local, w.shape[1])
    gathered = x.new_empty(tp * s_local, k)
    side = CommStream(x.device)
    own = slice(rank * s_local, (rank + 1) * s_local)
    side.follow_compute()
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
        side.compute_waits(event)
        torch.mm(gathered[start : start + rows], w, out=out[start : start + rows])
    if grad_w is not None:
        add_peer_wgrad(grad_w, wgrad_lhs, gathered, tp, rank)
    side.join()
    return out, gathered, grad_w


def rs_copy_engine(
    y: torch.Tensor,
    w: torch.Tensor,
    group: Any,
    tp: int,
    rank: int,
    chunks: int,
    label: str,
    overlap: Callable[[], torch.Tensor] | None = None,
):
    """This rank's row block of `sum_ranks(y @ w)` with copy-engine pushes; returns (out, extra)
    where `extra = overlap()` ran beside the pushes (None without `overlap`)."""
    s_local = y.shape[0] // tp
    rows = s_local // chunks
    n = w.shape[1]
    slot = s_local * n  # elements of one sender's slot in a receiver's buffer
    ws = _workspace(group, tp * slot * y.element_size())
    hdl = ws[0]
    side = CommStream(y.device)
    hdl.barrier(channel=0)  # every rank has added in its slots of the last call: they are free
    for step in range(1, tp):
        dst = (rank + step) % tp
        for c in range(chunks):
            start = dst * s_local + c * rows
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
    for src in range(tp):
        if src != rank:
            out.add_(_buffer(ws, rank, (s_local, n), y.dtype, src * slot))
    return out, extra


def ag(x: torch.Tensor, w: torch.Tensor, c: AgCall):
    """(out, gathered or None, grad_w or None) of all_gather_matmul over the copy engines."""
    return ag_copy_engine(
        x,
        w,
        c.group,
        c.tp,
        c.rank,
        c.chunks,
        c.label,
        c.wgrad_lhs,
        push=c.copy_push,
        need_gathered=c.return_gathered,
    )


def rs(y: torch.Tensor, w: torch.Tensor, c: RsCall):
    """(out, overlap's result) of matmul_reduce_scatter over the copy engines."""
    return rs_copy_engine(y, w, c.group, c.tp, c.rank, c.chunks, c.label, c.overlap)
