"""Synthetic tokens follow their recurrence, and the ranks' rows tile the batch."""

from __future__ import annotations

import torch

from tpscope.fusion.data import sequence_major, synthetic_batch


def test_tokens_follow_an_affine_recurrence():
    t = synthetic_batch(vocab=50, batch=3, seq_len=9, seed=2, step=4)
    assert t.shape == (3, 10) and int(t.max()) < 50
    for seq in t:
        a = next(m for m in (1, 3, 5, 7) if all((m * seq[i] + (seq[1] - m * seq[0])) % 50 == seq[i + 1]
                                               for i in range(9)))
        assert a in (1, 3, 5, 7)
    assert torch.equal(t, synthetic_batch(50, 3, 9, 2, 4))
    assert not torch.equal(t, synthetic_batch(50, 3, 9, 2, 5))


def test_sequence_major_rows():
    t = synthetic_batch(vocab=100, batch=2, seq_len=4, seed=0, step=0)
    inputs, targets = sequence_major(t)
    assert inputs.shape == targets.shape == (8,)
    for pos in range(4):  # row = position * batch + sequence
        for seq in range(2):
            assert inputs[pos * 2 + seq] == t[seq, pos] and targets[pos * 2 + seq] == t[seq, pos + 1]
