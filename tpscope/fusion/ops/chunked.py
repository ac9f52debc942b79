"""`chunked`: k collectives of row chunks issued on a high-priority side stream, pipelined with k
GEMMs (docs/runtime.md, "The ops"); the reduce-scatter's chunks interleave rows so that each
rank's shard stays contiguous."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import record_function

from tpscope.fusion.ops import compat
from tpscope.fusion.ops.common import AG_GEMM, GEMM_RS, AgCall, RsCall, add_peer_wgrad
from tpscope.fusion.ops.resources import gemm_sm_margin
from tpscope.fusion.ops.schedule import chunk_bounds
from tpscope.fusion.ops.streams import CommStream, wait_all


def ag(x: torch.Tensor, w: torch.Tensor, c: AgCall):
    """(out, gathered, grad_w) of all_gather_matmul in chunks."""
    return _ag_chunked(
        x,
        w,
        c.group,
        c.tp,
        c.rank,
        c.chunks,
        c.label,
        c.need_gathered,
        c.own_first,
        c.sm_margin,
        c.wgrad_lhs,
        c.taper,
    )


def rs(y: torch.Tensor, w: torch.Tensor, c: RsCall):
    """(out, overlap's result) of matmul_reduce_scatter in chunks."""
    return _rs_chunked(y, w, c.group, c.tp, c.chunks, c.label, c.sm_margin, c.overlap, c.taper)


def _ag_chunked(
    x,
    w,
    group,
    tp: int,
    rank: int,
    chunks: int,
    label: str,
    return_gathered: bool,
    own_first: bool,
    sm_margin: int = 0,
    wgrad_lhs: torch.Tensor | None = None,
    taper: bool = False,
):
    """Chunk c gathers rows [a_c, b_c) of every rank's shard (tpscope.fusion.ops.schedule; `taper`
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
                    torch.mm(
                        buf[src * rows : (src + 1) * rows],
                        w,
                        out=out[src * s_local + a : src * s_local + b],
                    )
            if gathered is not None:
                with comm.issue():  # beside the next GEMMs
                    for src in range(tp):
                        if src != rank:
                            gathered[src * s_local + a : src * s_local + b].copy_(
                                buf[src * rows : (src + 1) * rows]
                            )
    comm.join()
    if grad_w is not None:
        add_peer_wgrad(grad_w, wgrad_lhs, gathered, tp, rank)
    return out, gathered, grad_w


def _rs_chunked(
    y,
    w,
    group,
    tp: int,
    chunks: int,
    label: str,
    sm_margin: int = 0,
    overlap: Callable[[], torch.Tensor] | None = None,
    taper: bool = False,
):
    """Chunk c computes rows [a_c, b_c) of every rank's block (tpscope.fusion.ops.schedule; `taper`
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
                        torch.mm(
                            y[dst * s_local + a : dst * s_local + b],
                            w,
                            out=partial[dst * rows : (dst + 1) * rows],
                        )
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
