"""The ring modes: point-to-point transfers overlapped with per-block GEMMs.

AG side, own shard first: the GEMM on this rank's shard starts at once while the shard goes to
the next rank; each later step multiplies the shard received in the step before while forwarding
it. GEMM-RS side, peer rows first: block b's partial sum travels the ring and ends at rank b, so
each rank computes the partial of the block it must pass on next while the last one is in flight,
and its own block last. Received buffers are fresh per step, so no stream waits for a GEMM to
finish reading before a transfer may overwrite it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import record_function

from tpscope.fusion.streams import CommStream, wait_all


def _exchange(send: torch.Tensor, recv: torch.Tensor, group: Any, rank: int, tp: int) -> list:
    """Send to the next rank and receive from the previous one, batched (one NCCL group)."""
    nxt = dist.get_global_rank(group, (rank + 1) % tp) if group is not None else (rank + 1) % tp
    prv = dist.get_global_rank(group, (rank - 1) % tp) if group is not None else (rank - 1) % tp
    ops = [
        dist.P2POp(dist.isend, send, nxt, group=group),
        dist.P2POp(dist.irecv, recv, prv, group=group),
    ]
    return dist.batch_isend_irecv(ops)


def ag_ring(x, w, group, tp: int, rank: int, label: str, return_gathered: bool):
    """All-gather-matmul over a send/recv ring, own shard first."""
    s_local, k = x.shape
    out = x.new_empty(tp * s_local, w.shape[1])
    gathered = x.new_empty(tp, s_local, k)
    comm = CommStream(x.device)
    comm.follow_compute()
    current, works = x, []
    for step in range(tp):
        src = (rank - step) % tp
        with record_function(f"tpscope/{label}/ag_gemm/chunk{step}"):
            if step < tp - 1:
                incoming = gathered[(src - 1) % tp]
                with comm.issue():
                    works = _exchange(current, incoming, group, rank, tp)
            torch.mm(current, w, out=out[src * s_local : (src + 1) * s_local])
            if step < tp - 1:
                wait_all(works, comm)
                current = incoming
    if not return_gathered:
        return out, None
    gathered[rank].copy_(x)
    return out, gathered.view(tp * s_local, k)


def rs_ring(y, w, group, tp: int, rank: int, label: str) -> torch.Tensor:
    """Matmul-reduce-scatter over a send/recv ring, peer rows first, own block last."""
    s_local = y.shape[0] // tp
    n = w.shape[1]
    comm = CommStream(y.device)
    works: list = []
    incoming = None
    for step in range(tp):
        block = (rank - 1 - step) % tp
        with record_function(f"tpscope/{label}/gemm_rs/chunk{step}"):
            partial = y[block * s_local : (block + 1) * s_local] @ w
            if incoming is not None:
                wait_all(works, comm)
                partial += incoming
            if step < tp - 1:
                incoming = y.new_empty(s_local, n)
                comm.follow_compute()
                with comm.issue():
                    works = _exchange(partial, incoming, group, rank, tp)
    return partial
