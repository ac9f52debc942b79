"""How a fused op shares the GPU with its collective: SMs left free by the GEMMs, CTAs of NCCL.

cuBLAS's Hopper GEMMs are persistent kernels of one CTA per SM (grid 2 x 66 on an H200, about
190-210 KB of shared memory each), and an NCCL kernel's CTA (about 100 KB) cannot share an SM with
one. A GEMM launched beside a collective therefore finds a few SMs taken, and the tiles those SMs
were given wait until the collective ends: the overlapped GEMM is slower by up to the whole
transfer (docs/benchmarks.md). Two levers fix the split instead of leaving it to
the block scheduler:

- `gemm_sm_margin(n)`: GEMMs issued inside it target `SMs - n` SMs (cuBLASLt's
  `CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET`, set by torch's `_set_sm_carveout_experimental`, which
  only the cuBLASLt path reads; the context selects that path and restores both settings).
- `fusion_group(group, max_ctas)`: an NCCL communicator over the same ranks whose kernels use at
  most `max_ctas` CTAs (ncclConfig_t.maxCTAs), for the fused ops only, so that the unfused
  collectives keep NCCL's own choice.

Neither does anything on CPU (gloo), where the same code runs in the tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

_GROUPS: dict[tuple[Any, int], Any] = {}


@contextlib.contextmanager
def gemm_sm_margin(margin: int, device: torch.device) -> Iterator[None]:
    """GEMMs issued inside leave `margin` SMs free for a collective (CUDA; no-op for 0 or CPU)."""
    if margin <= 0 or device.type != "cuda":
        yield
        return
    previous_library = torch.backends.cuda.preferred_blas_library()
    previous_margin = torch._C._get_sm_carveout_experimental()
    torch.backends.cuda.preferred_blas_library("cublaslt")
    torch._C._set_sm_carveout_experimental(margin)
    try:
        yield
    finally:
        torch._C._set_sm_carveout_experimental(previous_margin)
        torch.backends.cuda.preferred_blas_library(previous_library)


def _ranks(group: Any) -> list[int]:
    if group is None:
        return list(range(dist.get_world_size()))
    return dist.get_process_group_ranks(group)


def fusion_group(group: Any, max_ctas: int) -> Any:
    """A communicator over `group`'s ranks whose NCCL kernels use at most `max_ctas` CTAs, made
    once per (group, cap) and kept; `group` itself for 0, or where the backend is not NCCL.
    Collective: every rank of `group` must ask for the same caps in the same order."""
    if max_ctas <= 0 or dist.get_backend(group) != "nccl":
        return group
    key = (group, max_ctas)
    if key not in _GROUPS:
        options = dist.ProcessGroupNCCL.Options()
        options.is_high_priority_stream = True
        options.config.max_ctas = max_ctas
        _GROUPS[key] = dist.new_group(_ranks(group), backend="nccl", pg_options=options)
    return _GROUPS[key]
