"""What every mode's implementation of the two ops shares: the calls' options as one value each,
the names of the profiler ranges, the taper default, and the weight-gradient step that the
chunked and copy-engine modes both finish with. Imports no mode: each mode imports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from tpscope.runfolder.fusion_choice import Mode

AG_GEMM = "ag_gemm"
GEMM_RS = "gemm_rs"

TAPER_BY_DEFAULT = {Mode.RING.value: True, Mode.CHUNKED.value: False}
"""Whether a mode tapers its pieces unless told (tpscope.fusion.ops.schedule). Measured side by side
on shm (docs/benchmarks.md): the ring was faster tapered in every case, chunked
as fast or slower."""


def resolve_taper(mode: str, taper: bool | None) -> bool:
    """The taper `mode` runs with: `taper`, or the mode's default (TAPER_BY_DEFAULT) for None."""
    return TAPER_BY_DEFAULT.get(mode, False) if taper is None else taper


def group_size_rank(group: Any) -> tuple[int, int]:
    """(tp, rank in group); refuses an uninitialized torch.distributed with a clear error."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialized: call init_process_group first")
    return dist.get_world_size(group), dist.get_rank(group)


@dataclass(frozen=True, slots=True)
class AgCall:
    """One all_gather_matmul call's options, as every mode's implementation receives them."""

    group: Any
    tp: int
    rank: int
    chunks: int
    label: str
    need_gathered: bool  # the gathered input is returned or multiplied into the weight gradient
    return_gathered: bool
    own_first: bool
    sm_margin: int
    wgrad_lhs: torch.Tensor | None
    copy_push: bool
    taper: bool


@dataclass(frozen=True, slots=True)
class RsCall:
    """One matmul_reduce_scatter call's options, as every mode's implementation receives them."""

    group: Any
    tp: int
    rank: int
    chunks: int
    label: str
    sm_margin: int
    overlap: Any  # Callable[[], torch.Tensor] | None: the weight-gradient GEMM to run beside
    taper: bool
    ring_all_gather: bool


def add_peer_wgrad(
    grad_w: torch.Tensor, wgrad_lhs: torch.Tensor, gathered: torch.Tensor, tp: int, rank: int
) -> None:
    """Add the peers' blocks `wgrad_lhs[b]^T @ gathered[b]` to `grad_w`, which holds the own
    block's (computed beside the first transfer)."""
    s_local = gathered.shape[0] // tp
    for src in range(tp):
        if src != rank:
            block = slice(src * s_local, (src + 1) * s_local)
            grad_w.addmm_(wgrad_lhs[block].t(), gathered[block])
