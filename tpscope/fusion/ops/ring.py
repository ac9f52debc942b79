"""The ring modes: point-to-point transfers overlapped with per-block GEMMs.

AG side, own shard first: the GEMM on this rank's shard starts at once while the shard goes to
the next rank; each later step multiplies the shard received in the step before while forwarding
it. GEMM-RS side, peer rows first: block b's partial sum travels the ring and ends at rank b, so
each rank computes the partial of the block it must pass on next while the last one is in flight,
and its own block last. With `chunks` > 1 every ring step moves its block in that many row
chunks, each sent as soon as its GEMM is done (RS) or multiplied as soon as it arrives (AG).
Received buffers are fresh per step, so no transfer overwrites rows a GEMM still reads.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import record_function

from tpscope.fusion.ops import compat
from tpscope.fusion.ops.common import AgCall, RsCall
from tpscope.fusion.ops.resources import gemm_sm_margin
from tpscope.fusion.ops.schedule import chunk_bounds
from tpscope.fusion.ops.streams import CommStream


def _exchange(send: torch.Tensor, recv: torch.Tensor, group: Any, rank: int, tp: int) -> list:
    """Send to the next rank and receive from the previous one, batched (one NCCL group)."""
    nxt = dist.get_global_rank(group, (rank + 1) % tp) if group is not None else (rank + 1) % tp
    prv = dist.get_global_rank(group, (rank - 1) % tp) if group is not None else (rank - 1) % tp
    ops = [
        dist.P2POp(dist.isend, send, nxt, group=group),
        dist.P2POp(dist.irecv, recv, prv, group=group),
    ]
    return dist.batch_isend_irecv(ops)


def _arrived(works: list, comm: CommStream):
    """The side stream waits for `works`; returns an event the compute stream can wait on."""
    with comm.issue():
        for work in works:
            work.wait()
    return comm.record()


def ag_ring(
    x,
    w,
    group,
    tp: int,
    rank: int,
    label: str,
    return_gathered: bool,
    chunks: int = 1,
    taper: bool = False,
):
    """All-gather-matmul over a send/recv ring, own shard first (`taper`: the last piece of each
    step is half an even one, tpscope.fusion.ops.schedule)."""
    s_local, k = x.shape
    bounds = chunk_bounds(s_local, chunks, "last" if taper else "")
    out = x.new_empty(tp * s_local, w.shape[1])
    gathered = x.new_empty(tp, s_local, k)
    comm = CommStream(x.device)
    comm.follow_compute()
    if return_gathered:
        with comm.issue():  # off the compute stream, which waits for this one at the end
            gathered[rank].copy_(x)
    current, pending = x, [[] for _ in range(chunks)]
    for step in range(tp):
        src = (rank - step) % tp
        incoming = gathered[(src - 1) % tp] if step < tp - 1 else None
        with record_function(f"tpscope/{label}/ag_gemm/chunk{step}"):
            ready, sent = [], [[] for _ in range(chunks)]
            for j, (a, b) in enumerate(bounds):
                part = slice(a, b)
                ready.append(_arrived(pending[j], comm) if step else None)
                if incoming is not None:
                    with comm.issue():
                        sent[j] = _exchange(current[part], incoming[part], group, rank, tp)
            if step == 0:
                torch.mm(current, w, out=out[src * s_local : (src + 1) * s_local])
            else:
                for j, (a, b) in enumerate(bounds):
                    comm.compute_waits(ready[j])
                    torch.mm(current[a:b], w, out=out[src * s_local + a : src * s_local + b])
            pending = sent
            if incoming is not None:
                current = incoming
    comm.join()
    if not return_gathered:
        return out, None
    return out, gathered.view(tp * s_local, k)


def _exchange_by_all_gather(send: torch.Tensor, group: Any, rank: int):
    """Two ranks: swap `send` with the peer's by one all-gather of it; returns (works, the peer's
    piece once they are done). NCCL's collectives moved 16-18 MiB pieces over shared memory
    faster than its send/recv (docs/benchmarks.md)."""
    pair = send.new_empty(2, *send.shape)
    work = compat.all_gather_single(
        pair.view(2 * send.shape[0], *send.shape[1:]), send, group=group, async_op=True
    )
    return [work], pair[1 - rank]


def rs_ring(
    y,
    w,
    group,
    tp: int,
    rank: int,
    label: str,
    chunks: int = 1,
    taper: bool = False,
    all_gather_exchange: bool = False,
) -> torch.Tensor:
    """Matmul-reduce-scatter over a send/recv ring, peer rows first, own block last (`taper`:
    the first piece of each step is half an even one, tpscope.fusion.ops.schedule). With
    `all_gather_exchange` and two ranks, each piece is swapped by an all-gather instead of a
    send/recv pair."""
    s_local = y.shape[0] // tp
    bounds = chunk_bounds(s_local, chunks, "first" if taper else "")
    n = w.shape[1]
    by_all_gather = all_gather_exchange and tp == 2
    comm = CommStream(y.device)
    pending: list[list] = [[] for _ in range(chunks)]
    incoming = None
    for step in range(tp):
        block = (rank - 1 - step) % tp
        last = step == tp - 1
        with record_function(f"tpscope/{label}/gemm_rs/chunk{step}"):
            partial = y.new_empty(s_local, n)
            nxt_in = None if last or by_all_gather else y.new_empty(s_local, n)
            received = [None] * chunks  # where each piece of the peer's partial lands
            sent: list[list] = [[] for _ in range(chunks)]
            for j, (a, b) in enumerate(bounds):
                part = slice(a, b)
                torch.mm(y[block * s_local + a : block * s_local + b], w, out=partial[part])
                if incoming is not None:
                    comm.compute_waits(_arrived(pending[j], comm))
                    partial[part] += incoming[j]
                if not last:
                    comm.follow_compute()
                    with comm.issue():
                        if by_all_gather:
                            sent[j], received[j] = _exchange_by_all_gather(
                                partial[part], group, rank
                            )
                        else:
                            sent[j], received[j] = (
                                _exchange(partial[part], nxt_in[part], group, rank, tp),
                                nxt_in[part],
                            )
            pending, incoming = sent, received
    comm.join()
    return partial


def ag(x: torch.Tensor, w: torch.Tensor, c: AgCall):
    """(out, gathered, None) of all_gather_matmul over the ring; its GEMMs leave `sm_margin` SMs."""
    with gemm_sm_margin(c.sm_margin, x.device):
        out, gathered = ag_ring(
            x, w, c.group, c.tp, c.rank, c.label, c.need_gathered, c.chunks, c.taper
        )
    return out, gathered, None


def rs(y: torch.Tensor, w: torch.Tensor, c: RsCall):
    """(out, None) of matmul_reduce_scatter over the ring; its GEMMs leave `sm_margin` SMs."""
    with gemm_sm_margin(c.sm_margin, y.device):
        return rs_ring(
            y, w, c.group, c.tp, c.rank, c.label, c.chunks, c.taper, c.ring_all_gather
        ), None
