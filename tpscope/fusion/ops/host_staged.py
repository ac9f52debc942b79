"""Mode `host_staged`: the transfers of AG-GEMM and GEMM-RS staged through host memory shared by
the ranks of a host, on the copy engines, for the regimes without peer access (`shm`, `socket`).

NCCL's kernels move bytes with SMs, and over `shm` the GEMMs beside them ran 24-40 % slower
(docs/benchmarks.md). `copy_engine` moves them without SMs but needs CUDA peer access (nvlink).
Here each rank copies its pieces device -> host into its slot of the shared region
(tpscope.fusion.ops.host_shm) on one side stream (a copy engine), raises its `ready` flag behind
them, and its peers copy them host -> device on another side stream (the other direction's copy
engine) once that flag says so; a `done` flag tells the sender that a slot it is about to
overwrite (slots are used in turn, two per rank) has been read by every peer. No kernel moves or
orders anything: copies, `cuStreamWriteValue32` and `cuStreamWaitValue32`. Pieces (`chunks` per
peer) pipeline with the GEMMs:

- AG-GEMM: the rank stages its shard's pieces while the compute stream multiplies the own shard;
  each peer's piece lands in the gathered input (kept for the weight gradient) and is multiplied
  there as soon as its copy is done (`tpscope/<label>/ag_gemm/chunk<j>`).
- GEMM-RS: the rows destined to each peer are multiplied first, piece by piece, and each piece is
  staged as soon as its GEMM is done; `overlap()` (the backward's weight gradient) runs next,
  while the pieces travel; then the own rows' GEMM adds the received sum in its epilogue,
  `addmm(received, y_own, w)` (beta = 1), per piece as it lands: no separate reduction pass at
  two ranks (each further peer's piece is added to the first one's before that GEMM).

On CPU (gloo) the same code runs with host copies and polled flags (tests, CPU runs). The ranks of
the group must share a host; validate.check_host_local refuses otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.profiler import record_function

from tpscope.fusion.ops.common import AgCall, RsCall, add_peer_wgrad
from tpscope.fusion.ops.host_shm import Region, region
from tpscope.fusion.ops.schedule import chunk_bounds
from tpscope.fusion.ops.streams import SIDE_STREAM_PRIORITY

_LANES: dict[int, tuple[torch.cuda.Stream, torch.cuda.Stream]] = {}


class Lanes:
    """The two copy streams of one op call on `device` (device -> host, host -> device), or
    no-ops for CPU tensors."""

    __slots__ = ("_out", "_in", "_main")

    def __init__(self, device: torch.device) -> None:
        self._out = self._in = self._main = None
        if device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            if index not in _LANES:
                _LANES[index] = tuple(
                    torch.cuda.Stream(device=index, priority=SIDE_STREAM_PRIORITY) for _ in range(2)
                )
            self._out, self._in = _LANES[index]
            self._main = torch.cuda.current_stream(index)

    @contextlib.contextmanager
    def _on(self, stream) -> Iterator[None]:
        if stream is None:
            yield
        else:
            with torch.cuda.stream(stream):
                yield

    def staging_out(self):
        """Issue on the device -> host stream, after all that the compute stream has queued."""
        if self._out is not None:
            self._out.wait_stream(self._main)
        return self._on(self._out)

    def mark(self):
        """An event at the current end of the compute stream (None on CPU): where buffers the
        host -> device stream writes were allocated (the caching allocator orders their reuse on
        the compute stream only)."""
        if self._main is None:
            return None
        event = torch.cuda.Event()
        event.record(self._main)
        return event

    def staging_in(self, after):
        """Issue on the host -> device stream, after the compute stream's `after` (from `mark`)."""
        if after is not None:
            self._in.wait_event(after)
        return self._on(self._in)

    def landed(self):
        """An event at the current end of the host -> device stream (None on CPU)."""
        if self._in is None:
            return None
        event = torch.cuda.Event()
        event.record(self._in)
        return event

    def compute_waits(self, event) -> None:
        if event is not None:
            self._main.wait_event(event)

    def join(self) -> None:
        """The compute stream waits for both copy streams (the inputs they read stay alive)."""
        if self._main is not None:
            self._main.wait_stream(self._out)
            self._main.wait_stream(self._in)


def _begin(reg: Region, pieces: int) -> tuple[int, int]:
    """(call number, the `ready` value before this call's first piece); `pieces`: how many each
    rank stages in this call."""
    reg.calls += 1
    base = reg.posted
    reg.posted += pieces
    return reg.calls, base


def _wait_slot_free(reg: Region, call: int) -> None:
    """Before writing slot `call % 2`: every peer has read what the call before last staged there."""
    if call > 2:
        for p in range(reg.tp):
            if p != reg.rank:
                reg.wait(reg.done(p), call - 2, f"rank {p} to read call {call - 2}'s pieces")


def ag_host_staged(
    x: torch.Tensor,
    w: torch.Tensor,
    group: Any,
    tp: int,
    rank: int,
    chunks: int,
    label: str,
    wgrad_lhs: torch.Tensor | None = None,
):
    """`all_gather(x) @ w` staged through shared host memory; returns (out, gathered, grad_w or
    None). With `wgrad_lhs`, also `wgrad_lhs^T @ gathered`, whose own block runs beside the
    transfers."""
    s_local, k = x.shape
    bounds = chunk_bounds(s_local, chunks)
    reg = region(group, x.numel() * x.element_size(), x.device)
    call, base = _begin(reg, chunks)
    which = call % 2
    lanes = Lanes(x.device)
    own = slice(rank * s_local, (rank + 1) * s_local)
    out = x.new_empty(tp * s_local, w.shape[1])
    gathered = x.new_empty(tp * s_local, k)  # where the peers' pieces land
    allocated = lanes.mark()
    with lanes.staging_out(), record_function(f"tpscope/{label}/ag_gemm/stage_out"):
        _wait_slot_free(reg, call)
        mine = reg.slot(rank, which, x.dtype, (s_local, k))
        for j, (a, b) in enumerate(bounds):
            mine[a:b].copy_(x[a:b], non_blocking=True)
            reg.post(reg.ready(rank), base + j + 1)
        gathered[own].copy_(x, non_blocking=True)
    landed = []
    with lanes.staging_in(allocated), record_function(f"tpscope/{label}/ag_gemm/stage_in"):
        for j, (a, b) in enumerate(bounds):
            for step in range(1, tp):
                src = (rank + step) % tp
                reg.wait(reg.ready(src), base + j + 1, f"rank {src}'s piece {j}")
                theirs = reg.slot(src, which, x.dtype, (s_local, k))
                gathered[src * s_local + a : src * s_local + b].copy_(
                    theirs[a:b], non_blocking=True
                )
            landed.append(lanes.landed())
        reg.post(reg.done(rank), call)
    torch.mm(x, w, out=out[own])
    grad_w = None if wgrad_lhs is None else wgrad_lhs[own].t() @ x
    for j, (a, b) in enumerate(bounds):
        with record_function(f"tpscope/{label}/ag_gemm/chunk{j}"):
            lanes.compute_waits(landed[j])
            for step in range(1, tp):
                src = (rank + step) % tp
                rows = slice(src * s_local + a, src * s_local + b)
                torch.mm(gathered[rows], w, out=out[rows])
    # the peers' blocks have landed (waited for above): beside the last copies
    if grad_w is not None:
        add_peer_wgrad(grad_w, wgrad_lhs, gathered, tp, rank)
    lanes.join()
    return out, gathered, grad_w


def rs_host_staged(
    y: torch.Tensor,
    w: torch.Tensor,
    group: Any,
    tp: int,
    rank: int,
    chunks: int,
    label: str,
    overlap: Callable[[], torch.Tensor] | None = None,
):
    """This rank's row block of `sum_ranks(y @ w)` staged through shared host memory; returns
    (out, extra) where `extra = overlap()` ran while the pieces travel (None without `overlap`)."""
    s_local = y.shape[0] // tp
    n = w.shape[1]
    bounds = chunk_bounds(s_local, chunks)
    block = (tp - 1) * s_local  # rows a rank stages: its partial sums for every peer
    reg = region(group, block * n * y.element_size(), y.device)
    call, base = _begin(reg, (tp - 1) * chunks)
    which = call % 2
    lanes = Lanes(y.device)
    sent = y.new_empty(block, n)  # this rank's partial sums for its peers, step-major
    received = y.new_empty(block, n)  # the peers' partial sums of this rank's rows, by source
    allocated = lanes.mark()  # before the GEMMs: the copies in need not wait for them
    mine = reg.slot(rank, which, y.dtype, (block, n))
    for step in range(1, tp):
        dst = (rank + step) % tp
        for j, (a, b) in enumerate(bounds):
            rows = slice((step - 1) * s_local + a, (step - 1) * s_local + b)
            with record_function(f"tpscope/{label}/gemm_rs/chunk{(step - 1) * chunks + j}"):
                torch.mm(y[dst * s_local + a : dst * s_local + b], w, out=sent[rows])
            with lanes.staging_out(), record_function(f"tpscope/{label}/gemm_rs/stage_out"):
                if step == 1 and j == 0:
                    _wait_slot_free(reg, call)
                mine[rows].copy_(sent[rows], non_blocking=True)
                reg.post(reg.ready(rank), base + (step - 1) * chunks + j + 1)
    landed = []
    with lanes.staging_in(allocated), record_function(f"tpscope/{label}/gemm_rs/stage_in"):
        for j, (a, b) in enumerate(bounds):
            for step in range(1, tp):
                src = (rank - step) % tp  # this rank is src's step-th destination
                at = slice((step - 1) * s_local + a, (step - 1) * s_local + b)
                reg.wait(
                    reg.ready(src), base + (step - 1) * chunks + j + 1, f"rank {src}'s piece {j}"
                )
                received[at].copy_(reg.slot(src, which, y.dtype, (block, n))[at], non_blocking=True)
            landed.append(lanes.landed())
        reg.post(reg.done(rank), call)
    extra = overlap() if overlap is not None else None
    out = y.new_empty(s_local, n)
    own = y[rank * s_local : (rank + 1) * s_local]
    for j, (a, b) in enumerate(bounds):
        with record_function(f"tpscope/{label}/gemm_rs/chunk{(tp - 1) * chunks + j}"):
            lanes.compute_waits(landed[j])
            acc = received[a:b]
            # more than two ranks: the further peers' sums into the first's
            for step in range(2, tp):
                acc.add_(received[(step - 1) * s_local + a : (step - 1) * s_local + b])
            torch.addmm(acc, own[a:b], w, out=out[a:b])  # the reduction in the GEMM's epilogue
    lanes.join()
    return out, extra


def ag(x: torch.Tensor, w: torch.Tensor, c: AgCall):
    """(out, gathered, grad_w or None) of all_gather_matmul staged through shared host memory."""
    return ag_host_staged(x, w, c.group, c.tp, c.rank, c.chunks, c.label, c.wgrad_lhs)


def rs(y: torch.Tensor, w: torch.Tensor, c: RsCall):
    """(out, overlap's result) of matmul_reduce_scatter staged through shared host memory."""
    return rs_host_staged(y, w, c.group, c.tp, c.rank, c.chunks, c.label, c.overlap)
