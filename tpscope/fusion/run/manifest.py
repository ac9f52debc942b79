"""What rank 0 of `tpscope run` records in the run folder's manifest (tpscope.runfolder.manifest
holds its fields and writes it; docs/runtime.md, "The run folder").

Fields: tpscope version, torch/NCCL/CUDA versions, GPU name and count, regime and its env, mode,
chunks, tp, model shape, dtype, seq len, batch, steps, per-step wall times, tokens/s, peak memory;
plus what the analyzer or a reader may want to know (profiled steps, losses and their trend,
the training recipe, fusion per layer).
Unknown values are null, never a made-up 0.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
from dataclasses import asdict
from typing import Any

import torch

from tpscope import __version__
from tpscope.fusion.ops import compat
from tpscope.fusion.run.config import RunConfig
from tpscope.fusion.run.data import TASK
from tpscope.fusion.run.optim import warmup_steps
from tpscope.fusion.run.train import OPTIMIZER
from tpscope.runfolder.losses import loss_trend
from tpscope.runfolder.manifest import SCHEMA_VERSION, Manifest
from tpscope.runfolder.regimes import nccl_env


def timed_steps(cfg: RunConfig, profiled: list[int]) -> list[int]:
    """Steps whose times make tokens/s: not the first (allocation, autotuning, NCCL set-up) and
    not the traced or warming ones (profiler overhead), unless nothing else is left."""
    traced = set(profiled)
    if profiled:
        traced.update(range(cfg.profile_wait, cfg.profile_wait + cfg.profile_warmup))
    clean = [s for s in range(1, cfg.steps) if s not in traced]
    return clean or list(range(1 if cfg.steps > 1 else 0, cfg.steps))


def device_info(device: torch.device) -> dict[str, Any]:
    """GPU name and count, CUDA version; null on CPU where they do not apply."""
    if device.type == "cuda":
        return {
            "gpu_name": torch.cuda.get_device_name(device),
            "gpu_count": torch.cuda.device_count(),
            "cuda_version": torch.version.cuda,
        }
    return {
        "gpu_name": None,
        "gpu_count": 0,
        "cuda_version": torch.version.cuda,
        "cpu": platform.processor() or platform.machine(),
    }


def build_manifest(
    *,
    cfg: RunConfig,
    regime: str,
    regime_env: dict[str, str],
    tp: int,
    world_size: int,
    backend: str,
    device: torch.device,
    losses: list[float],
    step_times_ms_by_rank: list[list[float]],
    peak_memory_by_rank: list[int],
    peak_memory_kind: str,
    profiled: list[int],
    fusion_by_layer: dict[str, dict],
    auto: dict | None,
    command: list[str],
    embed_overlap: bool = False,
) -> Manifest:
    """The run's manifest. Step time of a step is the slowest rank's. `embed_overlap`:
    whether the embedding's gradient did travel beside the optimizer (TrainResult)."""
    per_step = [max(ts) for ts in zip(*step_times_ms_by_rank)]
    used = timed_steps(cfg, profiled)
    median_ms = statistics.median(per_step[s] for s in used) if used else None
    tokens_per_s = cfg.tokens_per_step / (median_ms / 1e3) if median_ms else None
    return Manifest(
        **{
            "schema_version": SCHEMA_VERSION,
            "tpscope_version": __version__,
            "complete": True,  # the launcher sets it false (with "stopped": why) when a run does not finish
            "torch_version": torch.__version__,
            "nccl_version": compat.nccl_version() if backend == "nccl" else None,
            "python_version": sys.version.split()[0],
            **device_info(device),
            "backend": backend,
            "device": device.type,
            "collectives": compat.collective_names(),
            "regime": regime,
            "regime_env": regime_env,
            "nccl_env": nccl_env(os.environ),
            "mode": cfg.mode,
            "chunks": None if cfg.auto else cfg.fusion.chunks,
            "sm_margin": cfg.fusion.sm_margin,
            "comm_ctas": cfg.fusion.comm_ctas,
            "bwd_overlap": cfg.fusion.bwd_overlap,
            "ring_all_gather": cfg.fusion.ring_all_gather,
            "embed_overlap": embed_overlap,
            "fusion_by_layer": fusion_by_layer,
            "auto": auto,
            "tp": tp,
            "world_size": world_size,
            "model": asdict(cfg.model),
            "param_count": cfg.model.param_count(),
            "dtype": cfg.dtype,
            "seq_len": cfg.seq_len,
            "batch": cfg.batch,
            "tokens_per_step": cfg.tokens_per_step,
            "steps": cfg.steps,
            "lr": cfg.lr,
            "warmup_steps": warmup_steps(cfg.steps, cfg.warmup_steps),
            "decay_to": cfg.decay_to,
            "grad_clip": cfg.grad_clip,
            "weight_decay": cfg.weight_decay,
            "optimizer": OPTIMIZER,
            "data": TASK,
            "seed": cfg.seed,
            "profiler": {
                "wait": cfg.profile_wait,
                "warmup": cfg.profile_warmup,
                "active": cfg.profile_active,
                "profiled_steps": profiled,
                "record_shapes": True,
            },
            "step_time_source": "cuda_events" if device.type == "cuda" else "wall_clock",
            "step_times_ms": per_step,
            "step_times_ms_by_rank": step_times_ms_by_rank,
            "timed_steps": used,
            "median_step_time_ms": median_ms,
            "tokens_per_s": tokens_per_s,
            "tokens_per_s_per_gpu": tokens_per_s / tp
            if tokens_per_s and device.type == "cuda"
            else None,
            "losses": losses,
            "loss_trend": asdict(trend) if (trend := loss_trend(losses)) else None,
            "peak_memory_bytes": max(peak_memory_by_rank) if peak_memory_by_rank else None,
            "peak_memory_bytes_by_rank": peak_memory_by_rank,
            "peak_memory_kind": peak_memory_kind,
            "command": command,
        }
    )
