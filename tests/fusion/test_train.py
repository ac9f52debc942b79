"""A few training steps give the same losses in every mode, and the same as one process (TP=1)."""

from __future__ import annotations

import json
import os

import torch

from tpscope.fusion.config import FusionChoice, ModelConfig, RunConfig
from tpscope.fusion.train import profiled_steps, train

from ._dist import run_world, scratch_dir

CFG = RunConfig(out_dir="unused", device="cpu", dtype="float32", steps=3, seq_len=16, batch=2,
                profile_active=0, lr=3e-3, model=ModelConfig(layers=1, hidden=32, ffn=64, heads=4, vocab=32))
MODES = [FusionChoice(mode="none"), FusionChoice(mode="chunked", chunks=4), FusionChoice(mode="ring")]


def _train(rank: int, world: int, out: str) -> None:
    results = {}
    for fusion in MODES if world > 1 else MODES[:1]:
        r = train(CFG, rank=rank, tp=world, device=torch.device("cpu"), plan=lambda _l, f=fusion: f)
        assert len(r.step_times_ms) == CFG.steps and all(t > 0 for t in r.step_times_ms)
        assert r.peak_memory_bytes > 0 and r.peak_memory_kind == "process_max_rss"
        assert r.embed_overlap is False  # CUDA only (train.defers_embed_grad); test_model covers the deferral
        results[f"{fusion.mode}{fusion.chunks}"] = r.losses
    if rank == 0:
        with open(os.path.join(out, f"world{world}.json"), "w") as fh:
            json.dump(results, fh)


def test_losses_equal_in_every_mode_and_to_tp1():
    out = scratch_dir()
    run_world(_train, 2, out)
    run_world(_train, 1, out)
    tp2 = json.load(open(os.path.join(out, "world2.json")))
    tp1 = json.load(open(os.path.join(out, "world1.json")))["none1"]
    for mode, losses in tp2.items():
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(tp1), rtol=1e-4, atol=1e-5, msg=mode)
    assert len(set(tp1)) == len(tp1)  # the steps train on different batches and change the weights


def test_profiled_steps_follow_the_schedule():
    cfg = RunConfig(out_dir="x", steps=8, profile_wait=1, profile_warmup=2, profile_active=3)
    assert profiled_steps(cfg) == [3, 4, 5]
    assert profiled_steps(RunConfig(out_dir="x", profile_active=0)) == []


def test_a_deferred_embedding_gradient_splits_the_optimizer():
    """With the embedding's gradient deferred, the first AdamW holds every parameter but the late
    ones (embedding and RMSNorm weights), the second exactly those; otherwise one AdamW holds all."""
    from tpscope.fusion.model import TPTransformer
    from tpscope.fusion.train import make_optimizers

    fused = FusionChoice(mode="chunked", chunks=2)
    for defer in (True, False):
        model = TPTransformer(CFG.model, 2, lambda _l: fused, defer_embed_grad=defer)
        first, last = make_optimizers(model, CFG, torch.device("cpu"))
        ids = [[{id(p) for g in o.param_groups for p in g["params"]} for o in opts] for opts in (first, last)]
        everything = {id(p) for p in model.parameters()}
        if defer:
            late = {id(p) for p in [model.embed.weight, *model.replicated_parameters()]}
            assert ids == [[everything - late], [late]]
        else:
            assert ids == [[], [everything]]
