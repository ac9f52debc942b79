"""A small tensor-parallel transformer with sequence parallelism, built from the fused layers.

Token rows are laid out sequence-major (`row = position * batch + sequence`) and split by rows
over the TP ranks between the TP regions (RMSNorm and residuals run on this rank's rows).
Attention: a column-parallel QKV projection (this rank's heads, all positions), causal attention
per local head, a row-parallel output projection. MLP: column-parallel `fc1`, GELU, row-parallel
`fc2`. Embedding and LM head are vocabulary-parallel (tpscope.fusion.model.vocab; the head is a
column-parallel AG-GEMM over the vocabulary), so only the RMSNorm weights are replicated; their
gradients are summed over the ranks (`replicated_parameters`). Every rank returns the same loss.
With `defer_embed_grad` the embedding's backward all-gather is still in flight when `backward`
returns; `finish_backward` completes it (tpscope.fusion.model.vocab).

Initialisation follows Megatron-LM's GPT (as torchtitan's Llama does with its depth-scaled
output projections): every weight from N(0, 0.02^2), the projections that write into the
residual stream (`attn.out`, `mlp.fc2`) from N(0, (0.02 / sqrt(2 * layers))^2) so that the
residual's variance does not grow with depth, RMSNorm gains at 1. The LM head is not tied to the
embedding here; it is drawn at std H^-1/2, as torchtitan's Llama draws its output layer, so the
first logits have unit variance and the first loss is near ln(vocab).

Weights are drawn in full from one seed (`full_state`) and each rank keeps its block
(`TPTransformer.from_full`), so the TP model equals a single-process model of the same weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.model.layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    init_full_weight,
)
from tpscope.fusion.model.vocab import VocabParallelEmbedding, vocab_parallel_cross_entropy
from tpscope.runfolder.fusion_choice import FusionChoice

FusionPlan = Callable[[str], FusionChoice]
"""Maps a layer label (`block0.mlp.fc1`) to the fusion its op uses."""

RMS_EPS = 1e-6
INIT_STD = 0.02
"""Std of every weight but the residual-output projections and the head (Megatron-LM's GPT)."""


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm in float32 for stability, returned in x's dtype."""
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)
    return (normed * weight.float()).to(x.dtype)


class RMSNorm(nn.Module):
    """Root-mean-square norm over the hidden dimension (replicated weight)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight)


def full_state(
    cfg: ModelConfig, seed: int, device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """Every weight of the unsharded model, float32, drawn from `seed` on `device` (same values
    on every rank of one device type; drawing a billion-parameter model on the GPU takes
    milliseconds where one CPU thread under torchrun takes tens of seconds)."""
    g = torch.Generator(device=device).manual_seed(seed)
    h, f, v = cfg.hidden, cfg.ffn, cfg.vocab
    out_std = INIT_STD / math.sqrt(2 * cfg.layers)  # residual-output projections, depth-scaled

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n, device=device)

    state = {"embed": torch.randn(v, h, generator=g, device=device) * INIT_STD}
    for i in range(cfg.layers):
        p = f"block{i}."
        state[p + "norm1"] = ones(h)
        state[p + "attn.qkv"] = init_full_weight(h, 3 * h, g, INIT_STD)  # columns: q | k | v
        state[p + "attn.out"] = init_full_weight(h, h, g, out_std)
        state[p + "norm2"] = ones(h)
        state[p + "mlp.fc1"] = init_full_weight(h, f, g, INIT_STD)
        state[p + "mlp.fc2"] = init_full_weight(f, h, g, out_std)
    state["norm_f"] = ones(h)
    state["head"] = init_full_weight(h, v, g, h**-0.5)
    return state


def shard_state(
    cfg: ModelConfig, full: dict[str, torch.Tensor], rank: int, tp: int
) -> dict[str, torch.Tensor]:
    """This rank's blocks: QKV and fc1 by columns (q, k, v each by heads), out and fc2 by rows,
    the embedding by vocabulary rows and the head by vocabulary columns."""
    h, f = cfg.hidden, cfg.ffn
    hl, fl, vl = h // tp, f // tp, cfg.vocab // tp
    shard: dict[str, torch.Tensor] = {}
    for name, t in full.items():
        if name.endswith("attn.qkv"):
            parts = [t[:, j * h + rank * hl : j * h + (rank + 1) * hl] for j in range(3)]
            shard[name] = torch.cat(parts, dim=1)
        elif name.endswith("attn.out"):
            shard[name] = t[rank * hl : (rank + 1) * hl]
        elif name.endswith("mlp.fc1"):
            shard[name] = t[:, rank * fl : (rank + 1) * fl]
        elif name.endswith("mlp.fc2"):
            shard[name] = t[rank * fl : (rank + 1) * fl]
        elif name == "embed":
            shard[name] = t[rank * vl : (rank + 1) * vl]
        elif name == "head":
            shard[name] = t[:, rank * vl : (rank + 1) * vl]
        else:
            shard[name] = t
    return {k: v.contiguous() for k, v in shard.items()}


class Attention(nn.Module):
    """Causal self-attention over this rank's heads; in and out are row shards."""

    def __init__(
        self, cfg: ModelConfig, tp: int, plan: FusionPlan, prefix: str, group: Any
    ) -> None:
        super().__init__()
        self.heads_local = cfg.heads // tp
        self.head_dim = cfg.hidden // cfg.heads
        width = self.heads_local * self.head_dim
        qkv, out = prefix + "attn.qkv", prefix + "attn.out"
        self.qkv = ColumnParallelLinear(
            cfg.hidden, 3 * width, fusion=plan(qkv), label=qkv, group=group
        )
        self.out = RowParallelLinear(width, cfg.hidden, fusion=plan(out), label=out, group=group)

    def forward(self, x_shard: torch.Tensor, batch: int) -> torch.Tensor:
        qkv = self.qkv(x_shard)  # [T, 3 * width], all positions, local heads
        rows = qkv.shape[0]
        seq = rows // batch
        q, k, v = (
            t.reshape(seq, batch, self.heads_local, self.head_dim).permute(1, 2, 0, 3)
            for t in qkv.chunk(3, dim=1)
        )
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, nh, L, hd]
        att = att.permute(2, 0, 1, 3).reshape(rows, self.heads_local * self.head_dim)
        return self.out(att)


class MLP(nn.Module):
    """fc1 (column-parallel), GELU, fc2 (row-parallel): the reference shape's pair of ops."""

    def __init__(
        self, cfg: ModelConfig, tp: int, plan: FusionPlan, prefix: str, group: Any
    ) -> None:
        super().__init__()
        fc1, fc2 = prefix + "mlp.fc1", prefix + "mlp.fc2"
        self.fc1 = ColumnParallelLinear(
            cfg.hidden, cfg.ffn // tp, fusion=plan(fc1), label=fc1, group=group
        )
        self.fc2 = RowParallelLinear(
            cfg.ffn // tp, cfg.hidden, fusion=plan(fc2), label=fc2, group=group
        )

    def forward(self, x_shard: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x_shard), approximate="tanh"))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then + mlp(norm2(.))."""

    def __init__(
        self, cfg: ModelConfig, tp: int, plan: FusionPlan, prefix: str, group: Any
    ) -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.hidden)
        self.attn = Attention(cfg, tp, plan, prefix, group)
        self.norm2 = RMSNorm(cfg.hidden)
        self.mlp = MLP(cfg, tp, plan, prefix, group)

    def forward(self, x_shard: torch.Tensor, batch: int) -> torch.Tensor:
        h = x_shard + self.attn(self.norm1(x_shard), batch)
        return h + self.mlp(self.norm2(h))


class TPTransformer(nn.Module):
    """The whole model on one TP rank; `forward` returns this rank's share of the mean loss."""

    def __init__(
        self,
        cfg: ModelConfig,
        tp: int,
        plan: FusionPlan,
        group: Any = None,
        rank: int = 0,
        defer_embed_grad: bool = False,
    ) -> None:
        super().__init__()
        cfg.check_tp(tp)
        self.cfg, self.tp, self.group = cfg, tp, group
        self.vocab_start = rank * (cfg.vocab // tp)
        self.embed = VocabParallelEmbedding(
            cfg.vocab, cfg.hidden, tp, rank, group, defer_grad=defer_embed_grad
        )
        self.blocks = nn.ModuleList(
            Block(cfg, tp, plan, f"block{i}.", group) for i in range(cfg.layers)
        )
        self.norm_f = RMSNorm(cfg.hidden)
        self.head = ColumnParallelLinear(
            cfg.hidden, cfg.vocab // tp, fusion=plan("head"), label="head", group=group
        )

    def _slots(self) -> dict[str, torch.Tensor]:
        slots = {"embed": self.embed.weight, "norm_f": self.norm_f.weight, "head": self.head.weight}
        for i, b in enumerate(self.blocks):
            p = f"block{i}."
            slots.update(
                {
                    p + "norm1": b.norm1.weight,
                    p + "attn.qkv": b.attn.qkv.weight,
                    p + "attn.out": b.attn.out.weight,
                    p + "norm2": b.norm2.weight,
                    p + "mlp.fc1": b.mlp.fc1.weight,
                    p + "mlp.fc2": b.mlp.fc2.weight,
                }
            )
        return slots

    @classmethod
    def from_full(
        cls,
        cfg: ModelConfig,
        full: dict[str, torch.Tensor],
        rank: int,
        tp: int,
        plan: FusionPlan,
        group: Any = None,
        defer_embed_grad: bool = False,
    ) -> TPTransformer:
        """This rank's model holding its blocks of the full weights."""
        model = cls(cfg, tp, plan, group, rank, defer_embed_grad)
        device = next(iter(full.values())).device
        model.to(device).load_shard(shard_state(cfg, full, rank, tp))
        return model

    def load_shard(self, shard: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, slot in self._slots().items():
                slot.copy_(shard[name])

    def named_weights(self) -> dict[str, torch.Tensor]:
        """Parameters under the names of `full_state`."""
        return self._slots()

    def finish_backward(self) -> None:
        """Complete what `backward` left in flight: the embedding's deferred weight gradient."""
        self.embed.finish_backward()

    def late_parameters(self) -> list[nn.Parameter]:
        """Parameters whose gradients are complete only after `finish_backward` and the
        replicated-gradient all-reduce: the optimizer updates the others first, beside them."""
        late = self.replicated_parameters()
        return ([self.embed.weight] if self.embed.defer_grad else []) + late

    def replicated_parameters(self) -> list[nn.Parameter]:
        """Parameters every rank holds whole; their gradients must be summed over the ranks."""
        slots = self._slots()
        return [slots[n] for n in slots if "norm" in n]

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor, batch: int) -> torch.Tensor:
        """Mean next-token loss over all `tokens` (sequence-major rows, the whole batch on every
        rank); the same value on every rank."""
        x = self.embed(tokens)  # this rank's rows
        for block in self.blocks:
            x = block(x, batch)
        logits_local = self.head(self.norm_f(x))  # [T, V/tp]: every token, this rank's vocabulary
        return vocab_parallel_cross_entropy(
            logits_local, targets, self.vocab_start, self.group, self.tp
        )
