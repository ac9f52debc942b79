"""Refuse, before any process starts, a model whose training state cannot fit in memory.

The estimate is a lower bound: parameters, their gradients and AdamW's two moments, each in the
run's dtype (4 copies), sharded over the ranks; activations come on top. A run refused here would
have failed in every rank with an out-of-memory traceback.
"""

from __future__ import annotations

import os

from tpscope.errors import UserError
from tpscope.fusion.run.config import RunConfig

DTYPE_BYTES = {"bfloat16": 2, "float32": 4}
STATE_COPIES = 4  # weights, gradients, AdamW exp_avg and exp_avg_sq


def training_state_bytes(cfg: RunConfig) -> int:
    """Bytes of the full model's training state (all ranks together)."""
    return cfg.model.param_count() * DTYPE_BYTES[cfg.dtype] * STATE_COPIES


def host_memory_bytes() -> int | None:
    """Memory this machine can still give (MemAvailable), else its physical memory; None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(cfg: RunConfig, nproc: int) -> None:
    """UserError when the training state alone exceeds the memory: the host's for a CPU run (its
    ranks share it), one GPU's for a CUDA run (a rank holds 1/nproc of the state)."""
    need = training_state_bytes(cfg)
    if cfg.device == "cpu":
        have, where = host_memory_bytes(), "this machine has available"
    else:
        import torch

        have, where = torch.cuda.get_device_properties(0).total_memory, "one GPU has"
        need //= nproc
    if have is not None and need > have:
        raise UserError(
            f"the model ({cfg.model.param_count():,} parameters, --layers/--hidden/--ffn/--vocab) needs at least "
            f"{need / 2**30:.1f} GiB for weights, gradients and AdamW state, but {where} {have / 2**30:.1f} GiB"
        )
