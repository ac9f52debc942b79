"""A few training steps give the same losses in every mode, and the same as one process (TP=1);
the small model learns the synthetic task in every CPU mode, and every fused mode trains the same
model as unfused (fp32, 2 gloo ranks)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace

import pytest
import torch

from tests.fusion._dist import run_world, scratch_dir
from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.run.config import RunConfig
from tpscope.fusion.run.train import profiled_steps, train
from tpscope.runfolder.fusion_choice import FusionChoice

CFG = RunConfig(
    out_dir="unused",
    device="cpu",
    dtype="float32",
    steps=3,
    seq_len=16,
    batch=2,
    profile_active=0,
    lr=3e-3,
    model=ModelConfig(layers=1, hidden=32, ffn=64, heads=4, vocab=32),
)
MODES = [
    FusionChoice(mode="none"),
    FusionChoice(mode="chunked", chunks=4),
    FusionChoice(mode="ring"),
]


def _train(rank: int, world: int, out: str) -> None:
    results = {}
    for fusion in MODES if world > 1 else MODES[:1]:
        r = train(CFG, rank=rank, tp=world, device=torch.device("cpu"), plan=lambda _l, f=fusion: f)
        assert len(r.step_times_ms) == CFG.steps and all(t > 0 for t in r.step_times_ms)
        assert r.peak_memory_bytes > 0 and r.peak_memory_kind == "process_max_rss"
        # CUDA only (train.defers_embed_grad); test_model covers the deferral
        assert r.embed_overlap is False
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
        torch.testing.assert_close(
            torch.tensor(losses), torch.tensor(tp1), rtol=1e-4, atol=1e-5, msg=mode
        )
    assert len(set(tp1)) == len(tp1)  # the steps train on different batches and change the weights


def test_profiled_steps_follow_the_schedule():
    cfg = RunConfig(out_dir="x", steps=8, profile_wait=1, profile_warmup=2, profile_active=3)
    assert profiled_steps(cfg) == [3, 4, 5]
    assert profiled_steps(RunConfig(out_dir="x", profile_active=0)) == []


def test_a_deferred_embedding_gradient_splits_the_optimizer():
    """With the embedding's gradient deferred, the first AdamW holds every parameter but the late
    ones (embedding and RMSNorm weights), the second exactly those; otherwise one AdamW holds all."""
    from tpscope.fusion.model.model import TPTransformer
    from tpscope.fusion.run.train import make_optimizers

    fused = FusionChoice(mode="chunked", chunks=2)
    for defer in (True, False):
        model = TPTransformer(CFG.model, 2, lambda _l: fused, defer_embed_grad=defer)
        first, last = make_optimizers(model, CFG, torch.device("cpu"))
        ids = [
            [{id(p) for g in o.param_groups for p in g["params"]} for o in opts]
            for opts in (first, last)
        ]
        everything = {id(p) for p in model.parameters()}
        if defer:
            late = {id(p) for p in [model.embed.weight, *model.replicated_parameters()]}
            assert ids == [[everything - late], [late]]
        else:
            assert ids == [[], [everything]]


# The learning check: the smallest model and batch that show the task being learned (about 7 s a
# mode for 200 steps on 2 loaded cores). Rows per rank: 16 * 4 / 2 = 32.
LEARN = RunConfig(
    out_dir="unused",
    device="cpu",
    dtype="float32",
    steps=200,
    seq_len=16,
    batch=4,
    profile_active=0,
    lr=3e-3,
    model=ModelConfig(layers=1, hidden=32, ffn=64, heads=4, vocab=32),
)
LEARN_MODES = [
    FusionChoice(mode="none"),
    FusionChoice(mode="chunked", chunks=4),
    FusionChoice(mode="ring", chunks=2),
]
# Every other fusion a CPU run can take, for 50 steps against unfused's 50 (symm_mem and
# copy_engine need CUDA peer memory).
SAME_50 = [
    FusionChoice(mode="none"),
    FusionChoice(mode="chunked", chunks=1),
    FusionChoice(mode="chunked", chunks=2),
    FusionChoice(mode="chunked", chunks=8),
    FusionChoice(mode="chunked", chunks=2, own_first=False),
    FusionChoice(mode="chunked", chunks=4, bwd_overlap=False),
    FusionChoice(mode="ring"),
    FusionChoice(mode="ring", chunks=4),
    FusionChoice(mode="ring", chunks=2, ring_all_gather=True),
    FusionChoice(mode="ring", chunks=2, bwd_overlap=False),
    FusionChoice(mode="host_staged"),
    FusionChoice(mode="host_staged", chunks=4),
]
FP32_RTOL = 1e-5
"""Fused against unfused, per step, fp32: the largest difference measured over 200 steps of
LEARN was 3.3e-7 of the loss (chunked; summation order), so 1e-5 leaves a 30x margin and still
catches a fusion that changes what is computed (a wrong row or a missing chunk moves the loss
by far more from the first step)."""


def _learn(rank: int, world: int, out: str) -> None:
    results = {}
    for fusion in LEARN_MODES:
        r = train(
            LEARN, rank=rank, tp=world, device=torch.device("cpu"), plan=lambda _l, f=fusion: f
        )
        results["200/" + str(fusion)] = r.losses
    short = replace(LEARN, steps=50)
    for fusion in SAME_50:
        r = train(
            short, rank=rank, tp=world, device=torch.device("cpu"), plan=lambda _l, f=fusion: f
        )
        results["50/" + str(fusion)] = r.losses
    if rank == 0:
        with open(os.path.join(out, "learn.json"), "w") as fh:
            json.dump(results, fh)


@pytest.fixture(scope="module")
def learned() -> dict[str, list[float]]:
    out = scratch_dir()
    run_world(_learn, 2, out)
    return json.load(open(os.path.join(out, "learn.json")))


@pytest.mark.slow
def test_the_small_model_learns_in_every_cpu_mode(learned):
    """Mean loss of steps 181-200 at most half that of steps 1-20, in every mode."""
    for fusion in LEARN_MODES:
        losses = learned["200/" + str(fusion)]
        assert len(losses) == 200 and all(map(math.isfinite, losses)), fusion
        first, last = sum(losses[:20]) / 20, sum(losses[180:]) / 20
        assert last <= 0.5 * first, f"{fusion}: steps 1-20 {first:.3f}, steps 181-200 {last:.3f}"


@pytest.mark.slow
def test_every_fused_mode_trains_the_unfused_model(learned):
    """Per-step losses equal unfused's to FP32_RTOL: the 200 steps of the learning runs, and 50
    steps of every other fusion and chunk count a CPU run can take."""
    unfused = torch.tensor(learned["200/" + str(LEARN_MODES[0])], dtype=torch.float64)
    for fusion in LEARN_MODES[1:]:
        torch.testing.assert_close(
            torch.tensor(learned["200/" + str(fusion)], dtype=torch.float64),
            unfused,
            rtol=FP32_RTOL,
            atol=0,
            msg=str(fusion),
        )
    unfused50 = torch.tensor(learned["50/" + str(SAME_50[0])], dtype=torch.float64)
    assert not torch.equal(unfused50, unfused[:50])  # a 50-step run has its own schedule
    for fusion in SAME_50[1:]:
        torch.testing.assert_close(
            torch.tensor(learned["50/" + str(fusion)], dtype=torch.float64),
            unfused50,
            rtol=FP32_RTOL,
            atol=0,
            msg=str(fusion),
        )


def test_clipping_keeps_the_embedding_gradient_in_order():
    """Clipping needs every gradient before any update, so the embedding's gradient is deferred
    beside the optimizer only without it (and only on CUDA, with a fused head)."""
    from tpscope.fusion.run.train import defers_embed_grad

    fused = lambda _l: FusionChoice(mode="chunked", chunks=2)  # noqa: E731
    cuda = torch.device("cuda")  # a device object only: nothing runs on it
    assert not defers_embed_grad(CFG, fused, cuda)  # grad_clip 1.0 by default
    assert defers_embed_grad(replace(CFG, grad_clip=0.0), fused, cuda)
    assert not defers_embed_grad(replace(CFG, grad_clip=0.0), fused, torch.device("cpu"))
    assert not defers_embed_grad(
        replace(CFG, grad_clip=0.0), lambda _l: FusionChoice(mode="none"), cuda
    )
