"""The worker's fusion plan for a fixed mode records what every layer used."""

from __future__ import annotations

import torch

from tpscope.fusion.run.config import RunConfig
from tpscope.fusion.run.worker import _plan
from tpscope.runfolder.fusion_choice import FusionChoice


def test_fixed_plan_records_each_layer():
    cfg = RunConfig(out_dir="x", fusion=FusionChoice(mode="ring", chunks=2))
    plan, chosen, auto = _plan(cfg, 2, torch.device("cpu"), "nvlink")
    assert plan("block3.mlp.fc2") == FusionChoice(mode="ring", chunks=2)
    assert (
        chosen
        == {
            "block3.mlp.fc2": {
                "mode": "ring",
                "chunks": 2,
                "sm_margin": 0,
                "comm_ctas": 0,
                "bwd_overlap": True,
                "ring_all_gather": False,
            }
        }
        and auto is None
    )
    agx_plan, agx_chosen, _ = _plan(
        RunConfig(out_dir="x", fusion=FusionChoice(mode="ring", chunks=4, ring_all_gather=True)),
        2,
        torch.device("cpu"),
        "shm",
    )
    assert (
        agx_plan("block0.attn.out").ring_all_gather
        and agx_chosen["block0.attn.out"]["ring_all_gather"]
    )
    none_plan, none_chosen, _ = _plan(
        RunConfig(out_dir="x", fusion=FusionChoice(mode="none", sm_margin=8)),
        2,
        torch.device("cpu"),
        "nvlink",
    )
    none_plan("head")
    assert none_chosen["head"]["bwd_overlap"] is False  # the unfused baseline never overlaps
    plan, _, _ = _plan(
        RunConfig(out_dir="x", fusion=FusionChoice(mode="none", chunks=4)),
        2,
        torch.device("cpu"),
        "nvlink",
    )
    assert plan("block0.attn.qkv") == FusionChoice(mode="none", chunks=1)
