"""Vocabulary-parallel embedding and cross-entropy (Megatron-LM), so that no weight of
vocabulary size is replicated and no gradient of vocabulary size is all-reduced every step.

Embedding: each rank holds rows [r*V/tp, (r+1)*V/tp) of the table, looks up every token of the
sequence (zeros for tokens outside its rows) and the partial embeddings are reduce-scattered by
rows into the sequence-parallel layout; backward is the all-gather of the gradient.
With `defer_grad` the backward only issues that all-gather (on the side stream) and returns no
weight gradient; `finish_backward()` waits for it and writes the gradient, so that the optimizer
can update every other parameter while the gradient travels (tpscope.fusion.run.train).
Cross-entropy: each rank holds the logits of its vocabulary slice for every token; the row maximum,
the sum of exponentials and the target logit are all-reduced (three vectors of T floats), so every
rank gets the same mean loss, and each rank's backward is its slice of softmax minus one-hot.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import record_function

from tpscope.fusion.ops import compat
from tpscope.fusion.ops.streams import CommStream, wait_all


def _reduce_scatter_rows(partial: torch.Tensor, group: Any, tp: int, label: str) -> torch.Tensor:
    """Sum over ranks of `partial`, this rank's block of rows."""
    out = partial.new_empty(partial.shape[0] // tp, partial.shape[1])
    with record_function(f"tpscope/{label}/reduce_scatter"):
        compat.reduce_scatter_single(out, partial.contiguous(), group=group)
    return out


def _all_gather_rows(
    grad_out: torch.Tensor, group: Any, tp: int, label: str, async_op: bool = False
):
    """(every rank's rows of `grad_out` stacked, the collective's work when `async_op`)."""
    full = grad_out.new_empty(grad_out.shape[0] * tp, grad_out.shape[1])
    with record_function(f"tpscope/{label}.bwd/all_gather"):
        work = compat.all_gather_single(full, grad_out.contiguous(), group=group, async_op=async_op)
    return full, work


class _ReduceScatterRows(torch.autograd.Function):
    """Sum over ranks, this rank's block of rows; backward: all-gather of the gradient."""

    @staticmethod
    def forward(ctx, partial: torch.Tensor, group: Any, tp: int, label: str):
        ctx.group, ctx.tp, ctx.label = group, tp, label
        return _reduce_scatter_rows(partial, group, tp, label)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        full, _ = _all_gather_rows(grad_out, ctx.group, ctx.tp, ctx.label)
        return full, None, None, None


class _DeferredEmbedding(torch.autograd.Function):
    """Lookup and reduce-scatter as VocabParallelEmbedding; backward issues the all-gather of the
    gradient and leaves the weight gradient to `VocabParallelEmbedding.finish_backward`."""

    @staticmethod
    def forward(
        ctx,
        weight: torch.Tensor,
        idx: torch.Tensor,
        mask: torch.Tensor,
        module: VocabParallelEmbedding,
    ):
        ctx.module = module
        ctx.save_for_backward(idx, mask)
        return _reduce_scatter_rows(
            weight[idx] * mask.unsqueeze(1), module.group, module.tp, "embed"
        )

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        idx, mask = ctx.saved_tensors
        m = ctx.module
        comm = CommStream(grad_out.device)
        comm.follow_compute()
        with comm.issue():
            full, work = _all_gather_rows(grad_out, m.group, m.tp, "embed", async_op=True)
        m._pending = (work, comm, full, idx, mask)
        return None, None, None, None


class VocabParallelEmbedding(nn.Module):
    """`tokens [T] -> [T/tp, H]` (this rank's rows) from this rank's vocabulary rows."""

    def __init__(
        self,
        vocab: int,
        hidden: int,
        tp: int,
        rank: int,
        group: Any = None,
        defer_grad: bool = False,
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab // tp, hidden))
        self.start, self.tp, self.group = rank * (vocab // tp), tp, group
        self.defer_grad = defer_grad and tp > 1
        self._pending: tuple | None = None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.tp == 1:
            return self.weight[tokens]
        local = tokens - self.start
        inside = (local >= 0) & (local < self.weight.shape[0])
        idx, mask = local.clamp(0, self.weight.shape[0] - 1), inside.to(self.weight.dtype)
        if self.defer_grad and torch.is_grad_enabled() and self.weight.requires_grad:
            return _DeferredEmbedding.apply(self.weight, idx, mask, self)
        partial = self.weight[idx] * mask.unsqueeze(1)
        return _ReduceScatterRows.apply(partial, self.group, self.tp, "embed")

    def finish_backward(self) -> None:
        """Wait for the deferred all-gather and add this rank's rows of it to the weight gradient
        (a no-op when nothing is deferred)."""
        if self._pending is None:
            return
        work, comm, full, idx, mask = self._pending
        self._pending = None
        wait_all([work], comm)
        with torch.no_grad(), record_function("tpscope/embed.bwd/weight_grad"):
            grad = torch.zeros_like(self.weight).index_add_(0, idx, full * mask.unsqueeze(1))
            if self.weight.grad is None:
                self.weight.grad = grad
            else:
                self.weight.grad += grad


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy over all tokens from vocabulary-sliced logits (float32)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, start: int, group: Any, tp: int):
        with record_function("tpscope/loss/vocab_parallel_cross_entropy"):
            row_max = logits.max(dim=1).values
            if tp > 1:
                dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
            shifted = logits - row_max.unsqueeze(1)
            exp = shifted.exp()
            sum_exp = exp.sum(dim=1)
            local = targets - start
            inside = (local >= 0) & (local < logits.shape[1])
            idx = local.clamp(0, logits.shape[1] - 1)
            target_logit = shifted.gather(1, idx.unsqueeze(1)).squeeze(1) * inside
            if tp > 1:
                both = torch.stack([sum_exp, target_logit])
                dist.all_reduce(both, group=group)
                sum_exp, target_logit = both[0], both[1]
            loss = (sum_exp.log() - target_logit).mean()
        ctx.save_for_backward(exp / sum_exp.unsqueeze(1), idx, inside)
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        softmax, idx, inside = ctx.saved_tensors
        grad = softmax.clone()
        grad.scatter_add_(1, idx.unsqueeze(1), -inside.to(grad.dtype).unsqueeze(1))
        grad *= grad_loss / softmax.shape[0]
        return grad, None, None, None, None


def vocab_parallel_cross_entropy(
    logits_local: torch.Tensor, targets: torch.Tensor, start: int, group: Any = None, tp: int = 1
) -> torch.Tensor:
    """The mean next-token loss over all tokens, the same value on every rank."""
    return _VocabParallelCrossEntropy.apply(logits_local.float(), targets, start, group, tp)
