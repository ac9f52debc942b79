"""Mode `symm_mem`: torch's own fused ops over symmetric memory (CUDA and NCCL only).

They copy over CUDA peer access whatever NCCL is told, so in the `shm` and `socket` regimes they
are not a cross-node baseline (docs/benchmarks.md). A build without them gives a clear error.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from tpscope.fusion.ops import compat
from tpscope.fusion.ops.common import AgCall, RsCall


class SymmMemUnavailable(RuntimeError):
    """This torch build or device has no symmetric-memory fused ops."""


def _ops_and_group(group: Any):
    ops = compat.symm_mem_ops()
    if ops is None:
        raise SymmMemUnavailable(
            f"mode symm_mem: torch {torch.__version__} has no symm_mem fused ops; use none, chunked or ring"
        )
    pg = group if group is not None else dist.group.WORLD
    return ops, compat.enable_symm_mem(pg)


def ag_symm_mem(x: torch.Tensor, w: torch.Tensor, group: Any):
    """`torch.ops.symm_mem.fused_all_gather_matmul` on gather dim 0; returns (out, gathered)."""
    (fused_ag, _), name = _ops_and_group(group)
    gathered, outs = fused_ag(x, [w], 0, name)
    return outs[0], gathered


def rs_symm_mem(y: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """`torch.ops.symm_mem.fused_matmul_reduce_scatter` with a sum over scatter dim 0."""
    (_, fused_rs), name = _ops_and_group(group)
    return fused_rs(y, w, "sum", 0, name)


def ag(x: torch.Tensor, w: torch.Tensor, c: AgCall):
    """(out, gathered, None) of torch's fused all-gather-matmul."""
    out, gathered = ag_symm_mem(x, w, c.group)
    return out, gathered, None


def rs(y: torch.Tensor, w: torch.Tensor, c: RsCall):
    """(out, None) of torch's fused matmul-reduce-scatter."""
    return rs_symm_mem(y, w, c.group), None
