"""Synthetic tokens follow their recurrence, and the ranks' rows tile the batch."""

from __future__ import annotations

import torch

from tpscope.fusion.run.data import sequence_major, synthetic_batch


def test_tokens_follow_one_of_four_affine_rules():
    t = synthetic_batch(vocab=50, batch=3, seq_len=9, seed=2, step=4)
    assert t.shape == (3, 10) and int(t.max()) < 50
    rules = {(1, 1), (3, 7), (5, 3), (7, 5)}  # so that a token has 4 possible successors
    for seq in t:
        followed = [
            (a, b) for a, b in rules if all((a * seq[i] + b) % 50 == seq[i + 1] for i in range(9))
        ]
        assert len(followed) == 1
    assert torch.equal(t, synthetic_batch(50, 3, 9, 2, 4))
    assert not torch.equal(t, synthetic_batch(50, 3, 9, 2, 5))


def test_a_token_has_at_most_four_successors_across_batches():
    """The transition table is the same in every batch: that is what makes the task learnable."""
    t = torch.cat(
        [synthetic_batch(vocab=64, batch=8, seq_len=32, seed=0, step=s) for s in range(20)]
    )
    pairs = set(zip(t[:, :-1].reshape(-1).tolist(), t[:, 1:].reshape(-1).tolist()))
    successors: dict[int, set[int]] = {}
    for x, y in pairs:
        successors.setdefault(x, set()).add(y)
    assert max(len(s) for s in successors.values()) == 4


def test_sequence_major_rows():
    t = synthetic_batch(vocab=100, batch=2, seq_len=4, seed=0, step=0)
    inputs, targets = sequence_major(t)
    assert inputs.shape == targets.shape == (8,)
    for pos in range(4):  # row = position * batch + sequence
        for seq in range(2):
            assert (
                inputs[pos * 2 + seq] == t[seq, pos] and targets[pos * 2 + seq] == t[seq, pos + 1]
            )


def test_a_large_vocabulary_uses_1024_tokens_spread_over_it():
    """At V = 32000 the data holds at most 1024 distinct tokens, every 31st id, in every TP
    rank's half of the vocabulary, and the values x = token / 31 follow a rule mod 1024."""
    t = torch.cat(
        [synthetic_batch(vocab=32000, batch=4, seq_len=512, seed=1, step=s) for s in range(8)]
    )
    assert bool((t % 31 == 0).all()) and int(t.max()) <= 31 * 1023
    assert len(t.unique()) <= 1024 and int((t < 16000).sum()) > 0 and int((t >= 16000).sum()) > 0
    x = t // 31
    for seq in x:
        assert any(
            bool(((a * seq[:-1] + b) % 1024 == seq[1:]).all())
            for a, b in ((1, 1), (3, 7), (5, 3), (7, 5))
        )
