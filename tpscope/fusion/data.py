"""Synthetic tokens that a model can learn: each sequence follows `t[i+1] = (a*t[i] + b) % V`
with per-sequence `(a, b)` from a small set, so the loss falls as training works and every rank
draws the same batch from the same seed."""

from __future__ import annotations

import torch

_MULTIPLIERS = (1, 3, 5, 7)


def synthetic_batch(vocab: int, batch: int, seq_len: int, seed: int, step: int) -> torch.Tensor:
    """`[batch, seq_len + 1]` int64 tokens for one step (inputs are [:, :-1], targets [:, 1:])."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    a = torch.tensor(_MULTIPLIERS)[torch.randint(len(_MULTIPLIERS), (batch,), generator=g)]
    b = torch.randint(vocab, (batch,), generator=g)
    tokens = torch.empty(batch, seq_len + 1, dtype=torch.int64)
    tokens[:, 0] = torch.randint(vocab, (batch,), generator=g)
    for i in range(seq_len):
        tokens[:, i + 1] = (a * tokens[:, i] + b) % vocab
    return tokens


def sequence_major(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) as sequence-major rows (`row = position * batch + sequence`); rank r's
    rows between the TP regions are the r-th of tp equal blocks."""
    return tokens[:, :-1].t().reshape(-1), tokens[:, 1:].t().reshape(-1)
