"""The TP transformer against a single-process model written here in plain torch on the same
full weights: loss and every gradient, in each mode (world 2, float32)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tests.fusion._dist import run_world
from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.model.model import TPTransformer, full_state, shard_state
from tpscope.fusion.run.data import sequence_major, synthetic_batch
from tpscope.fusion.run.train import sum_replicated_grads
from tpscope.runfolder.fusion_choice import FusionChoice

# vocab split 12 + 12 over 2 ranks
CFG = ModelConfig(layers=2, hidden=16, ffn=32, heads=4, vocab=24)
BATCH, SEQ = 2, 8


def reference_loss(full: dict[str, torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of the unsharded model (rows sequence-major)."""
    h, nh = CFG.hidden, CFG.heads
    hd = h // nh
    inputs, targets = tokens[:, :-1].t().reshape(-1), tokens[:, 1:].t().reshape(-1)
    x = full["embed"][inputs]
    for i in range(CFG.layers):
        p = f"block{i}."
        a = F.rms_norm(x, (h,), full[p + "norm1"], eps=1e-6)
        q, k, v = (
            t.reshape(SEQ, BATCH, nh, hd).permute(1, 2, 0, 3)
            for t in (a @ full[p + "attn.qkv"]).split(h, 1)
        )
        att = (
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
            .permute(2, 0, 1, 3)
            .reshape(-1, h)
        )
        x = x + att @ full[p + "attn.out"]
        m = F.rms_norm(x, (h,), full[p + "norm2"], eps=1e-6)
        x = x + F.gelu(m @ full[p + "mlp.fc1"], approximate="tanh") @ full[p + "mlp.fc2"]
    logits = F.rms_norm(x, (h,), full["norm_f"], eps=1e-6) @ full["head"]
    return F.cross_entropy(logits, targets)


def _model(rank: int, world: int) -> None:
    full = {k: v.clone().requires_grad_(True) for k, v in full_state(CFG, seed=5).items()}
    tokens = synthetic_batch(CFG.vocab, BATCH, SEQ, seed=1, step=0)
    ref = reference_loss(full, tokens)
    ref.backward()
    ref_grads = shard_state(CFG, {k: v.grad for k, v in full.items()}, rank, world)
    inputs, targets = sequence_major(tokens)
    cases = [
        (FusionChoice(mode="none"), False),
        (FusionChoice(mode="chunked", chunks=2), False),
        (FusionChoice(mode="ring"), False),
        (FusionChoice(mode="chunked", chunks=2), True),
    ]
    for fusion, defer in cases:
        model = TPTransformer.from_full(
            CFG,
            {k: v.detach() for k, v in full.items()},
            rank,
            world,
            lambda _label, f=fusion: f,
            defer_embed_grad=defer,
        )
        loss = model(inputs, targets, BATCH)
        loss.backward()
        # deferred: the embedding's gradient is still travelling, and only finish_backward writes it
        assert (model.embed.weight.grad is None) == defer
        sum_replicated_grads(model)
        model.finish_backward()
        torch.testing.assert_close(
            loss.detach(), ref.detach(), rtol=1e-5, atol=1e-6, msg=fusion.mode
        )
        everyone = [torch.zeros(()) for _ in range(world)]
        dist.all_gather(everyone, loss.detach())
        assert all(torch.equal(e, everyone[0]) for e in everyone)  # the same loss on every rank
        for name, param in model.named_weights().items():
            torch.testing.assert_close(
                param.grad,
                ref_grads[name],
                rtol=1e-4,
                atol=1e-6,
                msg=f"{fusion.mode}: grad of {name}",
            )


def test_tp_model_equals_single_process_reference_world2():
    run_world(_model, 2)


def test_shards_tile_the_full_weights():
    full = full_state(CFG, seed=0)
    shards = [shard_state(CFG, full, r, 2) for r in range(2)]
    h = CFG.hidden
    q = torch.cat([s["block0.attn.qkv"][:, : h // 2] for s in shards], dim=1)
    assert torch.equal(q, full["block0.attn.qkv"][:, :h])
    assert torch.equal(torch.cat([s["block1.mlp.fc2"] for s in shards]), full["block1.mlp.fc2"])
    assert torch.equal(torch.cat([s["embed"] for s in shards]), full["embed"])  # vocabulary rows
    assert torch.equal(torch.cat([s["head"] for s in shards], dim=1), full["head"])
    assert torch.equal(shards[1]["norm_f"], full["norm_f"])


def test_full_state_is_reproducible():
    a, b = full_state(CFG, seed=9), full_state(CFG, seed=9)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["head"], full_state(CFG, seed=10)["head"])
