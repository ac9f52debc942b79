"""The learning-rate schedule and the global gradient clipping, against hand computation and
torch.nn.utils.clip_grad_norm_ on one process's whole gradient (2 gloo ranks for the shards)."""

from __future__ import annotations

import math

import torch

from tests.fusion._dist import run_world
from tpscope.fusion.run.optim import clip_grads, lr_at, warmup_steps


def test_warmup_then_cosine_to_a_tenth():
    kw = {"peak": 1.0, "steps": 12, "warmup": 2, "decay_to": 0.1}
    lrs = [lr_at(s, **kw) for s in range(12)]
    assert lrs[:3] == [0.5, 1.0, 1.0]  # linear warm-up, then the peak at the decay's start
    assert math.isclose(lrs[-1], 0.1)
    assert math.isclose(lrs[7], 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 5 / 9)))
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:]))
    assert warmup_steps(200, None) == 20 and warmup_steps(5, None) == 1 and warmup_steps(50, 0) == 0
    assert lr_at(0, peak=2.0, steps=10, warmup=0, decay_to=0.5) == 2.0


def _clip(rank: int, world: int) -> None:
    g = torch.Generator().manual_seed(1)
    full = [torch.randn(4, 6, generator=g) * 3, torch.randn(8, generator=g)]  # sharded by rows
    rep = [torch.randn(5, generator=g)]  # replicated (already summed over ranks)
    ref = [t.clone().requires_grad_(True) for t in full + rep]
    for t in ref:
        t.grad = t.detach().clone()
    ref_norm = torch.nn.utils.clip_grad_norm_(ref, max_norm=1.0)
    mine = [t.chunk(world)[rank].clone() for t in full]
    reps = [t.clone() for t in rep]
    norm = clip_grads(mine, reps, 1.0)
    torch.testing.assert_close(norm, ref_norm)
    assert float(norm) > 1.0  # the clip did scale
    for m, t in zip(mine, ref[:2]):
        torch.testing.assert_close(m, t.grad.chunk(world)[rank])
    torch.testing.assert_close(reps[0], ref[2].grad)


def test_clipping_uses_the_global_norm_world2():
    run_world(_clip, 2)
