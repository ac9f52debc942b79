"""Synthetic tokens that a model can learn: each sequence follows `t[i+1] = (a*t[i] + b) % V`
with its rule `(a, b)` drawn from the four of `RULES`, from a random first token. Every rank
draws the same batch from the same seed.

What there is to learn: the successor of a token is one of four (a table of 4V transitions, the
same in every batch), so a model that has learned them reaches ln 4 = 1.39 nats from the
ln V of a uniform guess; one that also reads the rule off the sequence's earlier tokens goes
below that. With odd multipliers and an even vocabulary each rule is a permutation of the tokens.
"""

from __future__ import annotations

import torch

RULES = ((1, 1), (3, 7), (5, 3), (7, 5))
"""(a, b) of the recurrences a sequence may follow."""
TASK = "affine4: t[i+1] = (a*t[i] + b) % V, (a, b) in " + ", ".join(f"({a},{b})" for a, b in RULES)
"""The task's name in the manifest (runs on other data are not compared loss for loss)."""


def synthetic_batch(vocab: int, batch: int, seq_len: int, seed: int, step: int) -> torch.Tensor:
    """`[batch, seq_len + 1]` int64 tokens for one step (inputs are [:, :-1], targets [:, 1:])."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    rule = torch.tensor(RULES)[torch.randint(len(RULES), (batch,), generator=g)]
    a, b = rule[:, 0], rule[:, 1]
    tokens = torch.empty(batch, seq_len + 1, dtype=torch.int64)
    tokens[:, 0] = torch.randint(vocab, (batch,), generator=g)
    for i in range(seq_len):
        tokens[:, i + 1] = (a * tokens[:, i] + b) % vocab
    return tokens


def sequence_major(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) as sequence-major rows (`row = position * batch + sequence`); rank r's
    rows between the TP regions are the r-th of tp equal blocks."""
    return tokens[:, :-1].t().reshape(-1), tokens[:, 1:].t().reshape(-1)
