"""Vocabulary-parallel embedding and cross-entropy against plain torch on the full tables (world 4:
every rank's vocabulary slice holds some of the tokens)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.fusion._dist import run_world
from tpscope.fusion.model.vocab import VocabParallelEmbedding, vocab_parallel_cross_entropy

T, H, V = 8, 3, 12


def _vocab(rank: int, world: int) -> None:
    g = torch.Generator().manual_seed(11)
    table, logits = torch.randn(V, H, generator=g), torch.randn(T, V, generator=g)
    tokens, targets = torch.randint(V, (T,), generator=g), torch.randint(V, (T,), generator=g)
    vl, rows = V // world, T // world
    # embedding: this rank's rows of table[tokens]; table gradient from every rank's rows
    emb = VocabParallelEmbedding(V, H, world, rank)
    with torch.no_grad():
        emb.weight.copy_(table[rank * vl : (rank + 1) * vl])
    out = emb(tokens)
    torch.testing.assert_close(out, table[tokens][rank * rows : (rank + 1) * rows])
    # rank q's output gradient is grads[q]; the table's gradient gathers all of them
    grads = [
        torch.randn(rows, H, generator=torch.Generator().manual_seed(100 + q)) for q in range(world)
    ]
    (out * grads[rank]).sum().backward()
    full = table.clone().requires_grad_(True)
    (full[tokens] * torch.cat(grads)).sum().backward()
    torch.testing.assert_close(emb.weight.grad, full.grad[rank * vl : (rank + 1) * vl])
    # cross-entropy: the same mean loss on every rank, each rank's slice of the logits' gradient
    local = logits[:, rank * vl : (rank + 1) * vl].clone().requires_grad_(True)
    loss = vocab_parallel_cross_entropy(local, targets, rank * vl, None, world)
    loss.backward()
    ref_logits = logits.clone().requires_grad_(True)
    ref = F.cross_entropy(ref_logits, targets)
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(local.grad, ref_logits.grad[:, rank * vl : (rank + 1) * vl])


def test_vocab_parallel_world4():
    run_world(_vocab, 4)
