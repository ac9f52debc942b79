"""Timing a region on every rank: CUDA events on GPU (wall clock on CPU), ranks aligned before
each repetition, the per-repetition time being the slowest rank's (docs/benchmarks.md);
several regions are timed in turn within each repetition (time_regions).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing:
    """Median and spread of one region's repetitions, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    max_ms: float
    reps: int

    def as_dict(self) -> dict[str, float | int]:
        return {
            "median_ms": self.median_ms,
            "p10_ms": self.p10_ms,
            "p90_ms": self.p90_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "reps": self.reps,
        }


def summarize(samples_ms: list[float]) -> Timing:
    """Median, 10th/90th percentile (nearest rank), min and max."""
    s = sorted(samples_ms)
    n = len(s)

    def pct(q: float) -> float:
        return s[min(n - 1, max(0, round(q * (n - 1))))]

    return Timing(
        median_ms=statistics.median(s),
        p10_ms=pct(0.1),
        p90_ms=pct(0.9),
        min_ms=s[0],
        max_ms=s[-1],
        reps=n,
    )


def align_ranks(device: torch.device, token: torch.Tensor) -> None:
    """Line the ranks up: a CPU barrier, then a one-element all-reduce on the compute stream so
    that the start event is recorded when every GPU has reached this point."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    dist.barrier()
    dist.all_reduce(token)


def time_region(
    fn: Callable[[], object], *, device: torch.device, reps: int, warmup: int
) -> Timing:
    """Time `fn` `reps` times after `warmup` untimed calls; the slowest rank's time per rep."""
    return time_regions({"fn": fn}, device=device, reps=reps, warmup=warmup)["fn"]


def spin_cycles_per_ms(device: torch.device) -> float:
    """Clock cycles of torch.cuda._sleep per millisecond on `device`, measured."""
    cycles = 10_000_000
    torch.cuda._sleep(cycles // 10)  # clocks up
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(cycles)
    b.record()
    b.synchronize()
    return cycles / max(a.elapsed_time(b), 1e-3)


def time_regions(
    fns: dict[str, Callable[[], object]],
    *,
    device: torch.device,
    reps: int,
    warmup: int,
    feed_ahead_ms: float = 0.0,
) -> dict[str, Timing]:
    """Median and spread of each of `fns` over `reps` repetitions (sample_regions)."""
    samples = sample_regions(
        fns, device=device, reps=reps, warmup=warmup, feed_ahead_ms=feed_ahead_ms
    )
    return {name: summarize(vals) for name, vals in samples.items()}


def sample_regions(
    fns: dict[str, Callable[[], object]],
    *,
    device: torch.device,
    reps: int,
    warmup: int,
    feed_ahead_ms: float = 0.0,
) -> dict[str, list[float]]:
    """Time each of `fns` `reps` times, in turn within each repetition (round robin), after
    `warmup` untimed calls each; per function, the slowest rank's time of each repetition (ms,
    in repetition order: the i-th samples of two functions were timed one after the other).

    Round robin, because a GPU's clock follows its temperature and power: timed one after the
    other, the first function would run on a cooler GPU than the last (on an H200 a GEMM timed
    first ran 3-9 % faster than the same GEMM timed later, docs/benchmarks.md).
    Every rank must pass the same functions in the same order (they are collective).

    `feed_ahead_ms` (CUDA): before each timed call the GPU spins that long, after the ranks are
    aligned and before the start event, so that the CPU queues the whole call while the GPU is
    busy: the time is then the GPU's alone, as in a training step whose CPU runs ahead of the
    GPU (nvbench's blocking kernel does the same). 0 also counts the CPU's launch time where the
    GPU waits for it."""
    token = torch.zeros(1, device=device)
    spin = 0
    if feed_ahead_ms > 0 and device.type == "cuda":
        spin = int(feed_ahead_ms * spin_cycles_per_ms(device))
    for fn in fns.values():
        for _ in range(warmup):
            align_ranks(device, token)
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    events: dict[str, list] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            align_ranks(device, token)
            if device.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if spin:
                    torch.cuda._sleep(spin)
                a.record()
                fn()
                b.record()
                events[name].append((a, b))
            else:
                t0 = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - t0) * 1e3)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        samples = {
            name: [float(a.elapsed_time(b)) for a, b in pairs] for name, pairs in events.items()
        }
    per_rank: list = [None] * dist.get_world_size()
    dist.all_gather_object(per_rank, samples)
    return {name: [max(vals) for vals in zip(*(r[name] for r in per_rank))] for name in fns}
