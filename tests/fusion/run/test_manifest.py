"""The manifest holds every field docs/runtime.md lists, with numbers taken from what was measured."""

from __future__ import annotations

import json

import torch

from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.run.config import RunConfig
from tpscope.fusion.run.manifest import build_manifest, timed_steps
from tpscope.runfolder.fusion_choice import FusionChoice
from tpscope.runfolder.manifest import write_manifest

DESIGN_FIELDS = [  # the run folder's manifest (docs/runtime.md)
    "tpscope_version",
    "torch_version",
    "nccl_version",
    "cuda_version",
    "gpu_name",
    "gpu_count",
    "regime",
    "regime_env",
    "mode",
    "chunks",
    "tp",
    "model",
    "dtype",
    "seq_len",
    "batch",
    "steps",
    "step_times_ms",
    "tokens_per_s",
    "peak_memory_bytes",
]


def _manifest(cfg: RunConfig) -> dict:
    return build_manifest(
        cfg=cfg,
        regime="shm",
        regime_env={"NCCL_P2P_DISABLE": "1"},
        tp=2,
        world_size=2,
        backend="gloo",
        device=torch.device("cpu"),
        losses=[3.0] * cfg.steps,
        step_times_ms_by_rank=[[100.0, 10, 20, 30, 40, 50], [90.0, 12, 18, 30, 44, 50]],
        peak_memory_by_rank=[5, 7],
        peak_memory_kind="process_max_rss",
        profiled=[2, 3],
        fusion_by_layer={"block0.mlp.fc1": {"mode": "ring", "chunks": 1}},
        auto=None,
        command=["tpscope", "run"],
    )


def test_every_design_field_is_present(tmp_path):
    cfg = RunConfig(
        out_dir=str(tmp_path),
        steps=6,
        seq_len=64,
        batch=2,
        model=ModelConfig(hidden=32, heads=2, ffn=64),
        fusion=FusionChoice(mode="ring"),
    )
    typed = _manifest(cfg)
    m = typed.to_dict()
    missing = [f for f in DESIGN_FIELDS if f not in m]
    assert missing == []
    assert m["step_times_ms"] == [100.0, 12, 20, 30, 44, 50]  # the slowest rank per step
    assert m["timed_steps"] == [4, 5]  # not step 0, not the profiler's warm-up or active steps
    assert m["median_step_time_ms"] == 47.0
    assert m["tokens_per_s"] == 128 / 0.047
    assert m["peak_memory_bytes"] == 7 and m["gpu_name"] is None and m["nccl_version"] is None
    path = write_manifest(tmp_path, typed)
    assert json.loads(path.read_text())["regime"] == "shm"
    assert not list(tmp_path.glob("*.tmp"))


def test_timed_steps_fall_back_when_every_step_is_traced():
    cfg = RunConfig(out_dir="x", steps=4, profile_wait=1, profile_warmup=1, profile_active=2)
    assert timed_steps(cfg, [2, 3]) == [1, 2, 3]
    assert timed_steps(RunConfig(out_dir="x", steps=1, profile_active=0), []) == [0]


def test_the_loss_trend_is_the_first_and_last_tenth(tmp_path):
    cfg = RunConfig(out_dir=str(tmp_path), steps=20, profile_active=0)
    losses = [10.0, 8.0] + [5.0] * 16 + [2.0, 1.0]  # tenths of 20 steps: 2 steps each
    m = build_manifest(
        cfg=cfg,
        regime="",
        regime_env={},
        tp=1,
        world_size=1,
        backend="gloo",
        device=torch.device("cpu"),
        losses=losses,
        step_times_ms_by_rank=[[1.0] * 20],
        peak_memory_by_rank=[1],
        peak_memory_kind="process_max_rss",
        profiled=[],
        fusion_by_layer={},
        auto=None,
        command=[],
    ).to_dict()
    assert m["loss_trend"] == {"window_steps": 2, "first_mean": 9.0, "last_mean": 1.5, "fell": True}
    assert m["warmup_steps"] == 2 and m["grad_clip"] == 1.0 and m["data"].startswith("affine4")
