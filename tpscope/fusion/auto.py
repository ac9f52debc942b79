"""`--mode auto`: choose the fusion of each layer kind by a short timed probe, cached per machine.

Each layer kind (attn.qkv, attn.out, mlp.fc1, mlp.fc2, the vocabulary-parallel head) has one forward op and one backward op of
known shapes (an AG-GEMM and a GEMM-RS, in either order). The probe times forward + backward for
every candidate (unfused, chunked and ring at the legal chunk counts, symm_mem on nvlink) with the
ranks aligned, and keeps the fastest of those that beat unfused clearly: median more than
`MIN_GAIN_RATIO` below unfused's and 90th percentile below unfused's 10th. Otherwise unfused is
kept, so that noise does not pick a fusion that loses (on the `socket` regime a 1 % median rule
alone picked chunking that lost 6 % end to end: docs/benchmarks.md). torch's symm_mem
ops are left out of `shm` and `socket` because they copy over the GPUs' peer link whatever NCCL
is told, which no cross-node link would do (BENCHMARKS.md).

Rank 0 reads and writes the cache (JSON, readable; default ~/.cache/tpscope/auto_probe.json),
keyed by GPU, tp, regime, torch, NCCL, dtype and the shapes, and broadcasts the choice.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tpscope.fusion import compat
from tpscope.fusion.config import FusionChoice, RunConfig
from tpscope.fusion.ops import all_gather_matmul, matmul_reduce_scatter
from tpscope.fusion.timing import time_region

MIN_GAIN_RATIO = 0.01
PROBE_REPS = 10
PROBE_WARMUP = 3
CHUNK_CANDIDATES = (1, 2, 4, 8)
RING_CHUNK_CANDIDATES = (1, 2, 4)
KINDS = ("attn.qkv", "attn.out", "mlp.fc1", "mlp.fc2", "head")


def default_cache_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tpscope" / "auto_probe.json"


def kind_shapes(cfg: RunConfig, tp: int) -> dict[str, dict[str, tuple[int, int, int]]]:
    """Per layer kind: the forward and backward ops as (side, rows, K, N) of the op's inputs."""
    t, h, f, v = cfg.tokens_per_step, cfg.model.hidden, cfg.model.ffn, cfg.model.vocab
    width = 3 * (h // tp)
    return {
        "attn.qkv": {"fwd": ("ag", t // tp, h, width), "bwd": ("rs", t, width, h)},
        "attn.out": {"fwd": ("rs", t, h // tp, h), "bwd": ("ag", t // tp, h, h // tp)},
        "mlp.fc1": {"fwd": ("ag", t // tp, h, f // tp), "bwd": ("rs", t, f // tp, h)},
        "mlp.fc2": {"fwd": ("rs", t, f // tp, h), "bwd": ("ag", t // tp, h, f // tp)},
        "head": {"fwd": ("ag", t // tp, h, v // tp), "bwd": ("rs", t, v // tp, h)},
    }


def candidates(local_rows: int, device: torch.device, regime: str) -> list[FusionChoice]:
    """Unfused first, then every legal fused variant."""
    out = [FusionChoice(mode="none")]
    out += [FusionChoice(mode="chunked", chunks=k) for k in CHUNK_CANDIDATES if local_rows % k == 0]
    out += [FusionChoice(mode="ring", chunks=k) for k in RING_CHUNK_CANDIDATES if local_rows % k == 0]
    if device.type == "cuda" and regime == "nvlink" and compat.symm_mem_ops() is not None:
        out.append(FusionChoice(mode="symm_mem"))
    return out


def _op(spec: tuple, device: torch.device, dtype: torch.dtype) -> Callable[[FusionChoice], Any]:
    side, rows, k, n = spec
    a = torch.randn(rows, k, device=device, dtype=dtype)
    w = torch.randn(k, n, device=device, dtype=dtype)
    if side == "ag":
        return lambda c: all_gather_matmul(a, w, mode=c.mode, chunks=c.chunks, label="auto.probe")
    return lambda c: matmul_reduce_scatter(a, w, mode=c.mode, chunks=c.chunks, label="auto.probe")


def probe_kind(specs: dict[str, tuple], device: torch.device, dtype: torch.dtype,
               regime: str, tp: int) -> dict[str, Any]:
    """Time forward + backward per candidate; every rank runs it (it is collective)."""
    fwd, bwd = _op(specs["fwd"], device, dtype), _op(specs["bwd"], device, dtype)
    local_rows = specs["fwd"][1] if specs["fwd"][0] == "ag" else specs["fwd"][1] // tp
    timings: dict[str, Any] = {}
    for c in candidates(local_rows, device, regime):
        key = f"{c.mode}/k{c.chunks}"
        try:
            t = time_region(lambda c=c: (fwd(c), bwd(c)), device=device, reps=PROBE_REPS, warmup=PROBE_WARMUP)
            timings[key] = {"median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms}
        except Exception as exc:  # noqa: BLE001 - a mode this build cannot run is not a candidate
            timings[key] = {"error": str(exc).splitlines()[0][:200]}
    return timings


def decide(timings: dict[str, dict]) -> tuple[FusionChoice, str]:
    """The fastest candidate that beats unfused clearly (median by more than MIN_GAIN_RATIO and
    its p90 below unfused's p10), else unfused."""
    base = timings["none/k1"]
    measured = {k: v for k, v in timings.items() if "median_ms" in v}
    clear = {k: v for k, v in measured.items() if k != "none/k1"
             and v["median_ms"] < base["median_ms"] * (1 - MIN_GAIN_RATIO) and v["p90_ms"] < base["p10_ms"]}
    if not clear:
        best = min(measured, key=lambda k: measured[k]["median_ms"])
        return FusionChoice(mode="none"), (
            f"no candidate beat unfused ({base['median_ms']:.3f} ms fwd+bwd, p10 {base['p10_ms']:.3f}) clearly "
            f"(median -{MIN_GAIN_RATIO:.0%} and p90 < unfused p10); fastest median was {best} "
            f"{measured[best]['median_ms']:.3f} ms")
    best = min(clear, key=lambda k: clear[k]["median_ms"])
    mode, k = best.split("/k")
    return FusionChoice(mode=mode, chunks=int(k)), (
        f"fastest of {len(measured)} probed that beat unfused clearly: {best} {clear[best]['median_ms']:.3f} ms "
        f"(p90 {clear[best]['p90_ms']:.3f}) fwd+bwd vs unfused {base['median_ms']:.3f} ms (p10 {base['p10_ms']:.3f})")


CACHE_SCHEMA = 2  # 2: timings with spread, the clear-win rule


def cache_key(cfg: RunConfig, tp: int, device: torch.device, regime: str, specs: dict) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    shapes = ";".join(f"{k}={','.join(map(str, v))}" for k, v in sorted(specs.items()))
    return f"v{CACHE_SCHEMA}|{gpu}|tp{tp}|{regime}|torch{torch.__version__}|nccl{compat.nccl_version()}|{cfg.dtype}|{shapes}"


def _read_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def auto_plan(cfg: RunConfig, tp: int, device: torch.device, regime: str):
    """(plan, record for the manifest). Collective: every rank must call it."""
    path = Path(cfg.auto_cache) if cfg.auto_cache else default_cache_path()
    dtype = getattr(torch, cfg.dtype)
    shapes = kind_shapes(cfg, tp)
    keys = {kind: cache_key(cfg, tp, device, regime, shapes[kind]) for kind in KINDS}
    box = [_read_cache(path) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    cache = box[0]
    choices: dict[str, dict] = {}
    for kind in KINDS:
        entry = cache.get(keys[kind])
        source = "cache"
        if entry is None:
            timings = probe_kind(shapes[kind], device, dtype, regime, tp)
            choice, why = decide(timings)
            entry = {"mode": choice.mode, "chunks": choice.chunks, "why": why, "timings_ms": timings,
                     "probed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            cache[keys[kind]] = entry
            source = "probe"
        choices[kind] = {**entry, "source": source, "key": keys[kind]}
    if dist.get_rank() == 0:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cache, indent=1) + "\n")
        except OSError:
            pass  # a read-only home: the choice still stands, it is only not cached
    plans = {kind: FusionChoice(mode=c["mode"], chunks=c["chunks"]) for kind, c in choices.items()}

    def plan(label: str) -> FusionChoice:
        return plans[next(k for k in KINDS if label.endswith(k))]

    return plan, {"cache_file": str(path), "min_gain_ratio": MIN_GAIN_RATIO,
                  "probe_reps": PROBE_REPS, "choices": choices}
