"""Synthetic tokens that a model can learn: each sequence follows `x[i+1] = (a*x[i] + b) % K`
with its rule `(a, b)` drawn from the four of `RULES`, from a random first value, and its tokens
are `x * (V // K)`: the K = min(V, ACTIVE_TOKENS) values spread evenly over the vocabulary (so
every TP rank's vocabulary shard holds its share). Every rank draws the same batch from the
same seed.

What there is to learn, in the order a model learns it: which K tokens occur (ln V -> ln K, 10.37
-> 6.93 nats at V = 32000; nothing at V <= 1024, where every token occurs); the successors of
each (four, the same in every batch: ln 4 = 1.39); then the rule of the sequence from its earlier
tokens (below ln 4). With odd multipliers and an even K each rule is a permutation.
"""

from __future__ import annotations

import torch

RULES = ((1, 1), (3, 7), (5, 3), (7, 5))
"""(a, b) of the recurrences a sequence may follow."""
ACTIVE_TOKENS = 1024
"""Most distinct tokens in the data, whatever the vocabulary."""
TASK = (
    f"affine4: x[i+1] = (a*x[i] + b) % K, token x * (V // K), K = min(V, {ACTIVE_TOKENS}), (a, b) in "
    + ", ".join(f"({a},{b})" for a, b in RULES)
)
"""The task's name in the manifest (runs on other data are not compared loss for loss)."""


def synthetic_batch(vocab: int, batch: int, seq_len: int, seed: int, step: int) -> torch.Tensor:
    """`[batch, seq_len + 1]` int64 tokens for one step (inputs are [:, :-1], targets [:, 1:])."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    rule = torch.tensor(RULES)[torch.randint(len(RULES), (batch,), generator=g)]
    a, b = rule[:, 0], rule[:, 1]
    k = min(vocab, ACTIVE_TOKENS)
    x = torch.empty(batch, seq_len + 1, dtype=torch.int64)
    x[:, 0] = torch.randint(k, (batch,), generator=g)
    for i in range(seq_len):
        x[:, i + 1] = (a * x[:, i] + b) % k
    return x * (vocab // k)


def sequence_major(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) as sequence-major rows (`row = position * batch + sequence`); rank r's
    rows between the TP regions are the r-th of tp equal blocks."""
    return tokens[:, :-1].t().reshape(-1), tokens[:, 1:].t().reshape(-1)
