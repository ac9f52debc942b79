"""The instrumented training loop: AdamW on synthetic tokens, torch.profiler, per-step timings.

The recipe is torchtitan's Llama recipe: AdamW (betas 0.9, 0.95, weight decay 0.1), a linear
learning-rate warm-up then cosine decay, the global gradient norm clipped to 1.0
(tpscope.fusion.run.optim), and the initialisation of tpscope.fusion.model.model (std 0.02, residual
projections depth-scaled).

Each step is timed with CUDA events on GPU (wall time on CPU). The profiler follows a
(wait, warmup, active) schedule and writes one gzipped Kineto trace per rank through
`tensorboard_trace_handler(out_dir, worker_name=f"rank{r}")`; `record_shapes` gives the
collectives their sizes. The loop returns the numbers the manifest records.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from tpscope.fusion.model.model import FusionPlan, TPTransformer, full_state
from tpscope.fusion.run.config import RunConfig
from tpscope.fusion.run.data import sequence_major, synthetic_batch
from tpscope.fusion.run.optim import clip_grads, lr_at, set_lr, warmup_steps

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


@dataclass(frozen=True, kw_only=True, slots=True)
class StepRecord:
    """One training step as rank 0 reports it."""

    step: int
    loss: float
    step_time_ms: float
    tokens_per_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainResult:
    """What one rank measured over the whole run."""

    losses: list[float]
    step_times_ms: list[float]
    peak_memory_bytes: int
    peak_memory_kind: str
    profiled_steps: list[int]
    embed_overlap: bool = False
    """Whether the embedding's gradient travelled beside the optimizer update."""


class _StepTimer:
    """CUDA events around a step on GPU (GPU time of the stream), wall time on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def start(self) -> None:
        if self.cuda:
            self._a = torch.cuda.Event(enable_timing=True)
            self._b = torch.cuda.Event(enable_timing=True)
            self._a.record()
        else:
            self._t0 = time.perf_counter()

    def stop_ms(self) -> float:
        if self.cuda:
            self._b.record()
            self._b.synchronize()
            return float(self._a.elapsed_time(self._b))
        return (time.perf_counter() - self._t0) * 1e3


def defers_embed_grad(cfg: RunConfig, plan: FusionPlan, device: torch.device) -> bool:
    """Whether the embedding's gradient travels beside the optimizer: asked for, the
    vocabulary-parallel head (the embedding's counterpart) is fused with backward overlap, and
    the run is on CUDA, where the all-gather runs on the side stream beside the optimizer's
    kernels, and gradients are not clipped (clipping needs the whole gradient's norm before any
    parameter is updated, the embedding's included). A CPU (gloo) run would only put it on gloo's
    threads beside a CPU optimizer on the same cores, and there, 4-rank test runs sometimes aborted
    at interpreter exit after all their work (2 of 30 against 0 of 30 without), so CPU runs keep
    the plain order."""
    return (
        device.type == "cuda"
        and cfg.embed_overlap
        and cfg.grad_clip == 0
        and plan("head").overlaps_backward
    )


def build_model(
    cfg: RunConfig, rank: int, tp: int, plan: FusionPlan, device: torch.device, group: Any = None
) -> TPTransformer:
    """This rank's model in the run's dtype on its device, weights from the run's seed."""
    full = full_state(cfg.model, cfg.seed, device)
    model = TPTransformer.from_full(
        cfg.model, full, rank, tp, plan, group, defers_embed_grad(cfg, plan, device)
    )
    del full
    return model.to(device=device, dtype=DTYPES[cfg.dtype])


BETAS = (0.9, 0.95)
OPTIMIZER = "AdamW(betas=(0.9, 0.95), eps=1e-8), fused kernel on CUDA"


def make_optimizers(
    model: TPTransformer, cfg: RunConfig, device: torch.device
) -> tuple[list, list]:
    """(first, last): AdamW over the parameters whose gradients `backward` completes, then over
    the late ones (TPTransformer.late_parameters) when the embedding's gradient is deferred;
    otherwise one AdamW over all, last. The same update either way (AdamW is per parameter). On
    CUDA AdamW's fused kernel instead of the foreach chain, which took about 16 ms per step in the
    sample runs of the reference model."""

    def adamw(params):
        return torch.optim.AdamW(
            params,
            lr=cfg.lr,
            betas=BETAS,
            eps=1e-8,
            weight_decay=cfg.weight_decay,
            fused=device.type == "cuda",
        )

    if not model.embed.defer_grad:
        return [], [adamw(model.parameters())]
    late = model.late_parameters()
    late_ids = {id(p) for p in late}
    return [adamw([p for p in model.parameters() if id(p) not in late_ids])], [adamw(late)]


def sum_replicated_grads(model: TPTransformer, group: Any = None) -> None:
    """Sum the replicated parameters' gradients (the RMSNorm weights, each rank having seen only
    its rows) over the TP ranks in one flat all-reduce."""
    grads = [p.grad for p in model.replicated_parameters() if p.grad is not None]
    if not grads or dist.get_world_size(group) == 1:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def _profiler(cfg: RunConfig, rank: int, device: torch.device):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU]
    extra = {}
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        extra["experimental_config"] = cuda_sync_events_config()
    return profile(
        activities=activities,
        **{k: v for k, v in extra.items() if v is not None},
        schedule=schedule(
            wait=cfg.profile_wait, warmup=cfg.profile_warmup, active=cfg.profile_active, repeat=1
        ),
        on_trace_ready=tensorboard_trace_handler(
            cfg.out_dir, worker_name=f"rank{rank}", use_gzip=True
        ),
        record_shapes=True,
    )


def cuda_sync_events_config():
    """The profiler setting that records `cuda_sync` events (cudaStreamWaitEvent and the CPU's
    synchronizations), the analyzer's real cross-stream edges (docs/metrics.md §7); None where this
    torch lacks it."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(enable_cuda_sync_events=True)
    except (ImportError, TypeError):
        return None


def profiled_steps(cfg: RunConfig) -> list[int]:
    """Steps whose events the traces hold (0-based, as `ProfilerStep#N` numbers them)."""
    if cfg.profile_active == 0:
        return []
    first = cfg.profile_wait + cfg.profile_warmup
    return list(range(first, min(first + cfg.profile_active, cfg.steps)))


def peak_memory(device: torch.device) -> tuple[int, str]:
    """(bytes, what they count): the CUDA caching allocator's peak, or the process's peak RSS."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_memory_allocated"
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_max_rss"


def train(
    cfg: RunConfig,
    *,
    rank: int,
    tp: int,
    device: torch.device,
    plan: FusionPlan,
    group: Any = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> TrainResult:
    """Train `cfg.steps` steps; rank 0 calls `on_step` after each one."""
    cfg.check_world(tp)
    model = build_model(cfg, rank, tp, plan, device, group)
    first, last = make_optimizers(model, cfg, device)
    replicated = model.replicated_parameters()
    sharded = [p for p in model.parameters() if all(p is not r for r in replicated)]
    warmup = warmup_steps(cfg.steps, cfg.warmup_steps)
    timer = _StepTimer(device)
    losses, times = [], []
    # All batches are drawn before the first step: drawing them is CPU work that would fill the
    # traces and delay the GPU (docs/benchmarks.md: time the training, not the data).
    batches = [
        tuple(
            t.to(device)
            for t in sequence_major(
                synthetic_batch(cfg.model.vocab, cfg.batch, cfg.seq_len, cfg.seed, step)
            )
        )
        for step in range(cfg.steps)
    ]
    prof = _profiler(cfg, rank, device) if cfg.profile_active else None
    if prof is not None:
        prof.start()
    try:
        for step in range(cfg.steps):
            inputs, targets = batches[step]
            timer.start()
            set_lr(
                first + last,
                lr_at(step, peak=cfg.lr, steps=cfg.steps, warmup=warmup, decay_to=cfg.decay_to),
            )
            for opt in first + last:
                opt.zero_grad(set_to_none=True)
            loss = model(inputs, targets, cfg.batch)  # the same mean loss on every rank
            loss.backward()
            for opt in first:  # beside the embedding gradient's all-gather, when it is deferred
                opt.step()
            sum_replicated_grads(model, group)
            model.finish_backward()
            if cfg.grad_clip > 0:  # never with a deferred embedding gradient (defers_embed_grad)
                clip_grads(
                    [p.grad for p in sharded if p.grad is not None],
                    [p.grad for p in replicated if p.grad is not None],
                    cfg.grad_clip,
                    group,
                )
            for opt in last:
                opt.step()
            ms = timer.stop_ms()
            losses.append(float(loss.detach()))
            times.append(ms)
            if prof is not None:
                prof.step()
            if on_step is not None and rank == 0:
                on_step(
                    StepRecord(
                        step=step,
                        loss=losses[-1],
                        step_time_ms=ms,
                        tokens_per_s=cfg.tokens_per_step / (ms / 1e3),
                    )
                )
    finally:
        if prof is not None:
            prof.stop()
    mem, kind = peak_memory(device)
    return TrainResult(
        losses=losses,
        step_times_ms=times,
        peak_memory_bytes=mem,
        peak_memory_kind=kind,
        profiled_steps=profiled_steps(cfg),
        embed_overlap=model.embed.defer_grad,
    )
