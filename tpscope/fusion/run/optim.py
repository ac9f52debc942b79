"""The training recipe's schedule and clipping (torchtitan's Llama recipe; docs/runtime.md, "Training").

Learning rate: a linear warm-up from lr/warmup to the peak over `warmup_steps`, then a cosine
decay to `lr * decay_to` at the last step. Gradients: clipped to a global L2 norm of `grad_clip`
over the whole model, every rank's shard counted once and the replicated weights (the RMSNorm
gains, whose gradients are summed over the ranks before this) counted once, so a TP run clips
exactly as one process does.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist


def warmup_steps(steps: int, warmup: int | None) -> int:
    """The warm-up length: as given, or a tenth of the steps (at least 1) when None."""
    return max(1, steps // 10) if warmup is None else warmup


def lr_at(step: int, *, peak: float, steps: int, warmup: int, decay_to: float) -> float:
    """Learning rate of 0-based `step`: linear warm-up over `warmup` steps (step 0 at
    peak/warmup), then cosine from the peak to `peak * decay_to` at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    span = steps - warmup
    if span <= 1:
        return peak
    progress = (step - warmup) / (span - 1)
    return peak * (decay_to + (1 - decay_to) * 0.5 * (1 + math.cos(math.pi * progress)))


def set_lr(optimizers: list[torch.optim.Optimizer], lr: float) -> None:
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = lr


def global_grad_norm(
    sharded: list[torch.Tensor], replicated: list[torch.Tensor], group: Any = None
) -> torch.Tensor:
    """L2 norm of the whole model's gradient: the shards' squares summed over the ranks, the
    replicated gradients (equal on every rank) once. A float32 scalar on the gradients' device."""
    dev = (sharded or replicated)[0].device

    def squares(grads: list[torch.Tensor]) -> torch.Tensor:
        # each norm accumulates in float32 without a float32 copy of the gradient
        norms = [torch.linalg.vector_norm(g, 2, dtype=torch.float32) for g in grads]
        return torch.stack(norms).square().sum() if norms else torch.zeros((), device=dev)

    total = squares(sharded)
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        dist.all_reduce(total, group=group)
    return (total + squares(replicated)).sqrt()


def clip_grads(
    sharded: list[torch.Tensor], replicated: list[torch.Tensor], max_norm: float, group: Any = None
) -> torch.Tensor:
    """Scale every gradient by min(1, max_norm / norm) (torch.nn.utils.clip_grad_norm_'s rule,
    over the global norm); returns the norm before clipping, on the device (no host sync).
    max_norm 0 measures only."""
    norm = global_grad_norm(sharded, replicated, group)
    if max_norm > 0:
        coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        grads = sharded + replicated
        if grads:
            torch._foreach_mul_(grads, coef.to(grads[0].dtype))
    return norm
