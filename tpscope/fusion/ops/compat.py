"""Collectives across torch versions, and the versions the manifest records.

torch 2.13 renamed `all_gather_into_tensor` / `reduce_scatter_tensor` to `all_gather_single` /
`reduce_scatter_single` and warns on the old names; torch 2.11 (the GPU machine) has only the old
ones. Both have the same argument order, so one lookup per name is the whole shim.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist

_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def all_gather_single(
    out: torch.Tensor, inp: torch.Tensor, group: Any = None, async_op: bool = False
):
    """All-gather `inp` of every rank along dim 0 into `out` (rank order)."""
    return _ALL_GATHER(out, inp, group=group, async_op=async_op)


def reduce_scatter_single(
    out: torch.Tensor, inp: torch.Tensor, group: Any = None, async_op: bool = False
):
    """Sum `inp` over ranks and give each rank its block of rows (dim 0) in `out`."""
    return _REDUCE_SCATTER(out, inp, op=dist.ReduceOp.SUM, group=group, async_op=async_op)


def collective_names() -> dict[str, str]:
    """Which torch functions the shim uses (recorded in the manifest)."""
    return {"all_gather": _ALL_GATHER.__name__, "reduce_scatter": _REDUCE_SCATTER.__name__}


def nccl_version() -> str | None:
    """NCCL's version as 'major.minor.patch', or None where torch has no NCCL."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - CPU wheels raise various errors here
        return None
    if isinstance(version, tuple):
        return ".".join(str(p) for p in version[:3])
    return str(version)


def symm_mem_ops() -> tuple[Any, Any] | None:
    """torch's fused ops (`fused_all_gather_matmul`, `fused_matmul_reduce_scatter`) or None."""
    try:
        import torch.distributed._symmetric_memory  # noqa: F401 - registers torch.ops.symm_mem
    except ImportError:
        return None
    ns = getattr(torch.ops, "symm_mem", None)
    try:
        return ns.fused_all_gather_matmul, ns.fused_matmul_reduce_scatter
    except (AttributeError, RuntimeError):
        return None


def enable_symm_mem(group: Any) -> str:
    """Make symmetric memory usable on `group` and return its name; older torch (2.11) needs the
    explicit enable call that 2.13 deprecates."""
    import torch.distributed._symmetric_memory as symm

    name = group.group_name
    enable = getattr(symm, "enable_symm_mem_for_group", None)
    if enable is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            enable(name)
    return name
