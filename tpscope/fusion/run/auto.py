"""`--mode auto`: choose the fusion of each layer kind by a short timed probe, cached per machine.

Each layer kind (attn.qkv, attn.out, mlp.fc1, mlp.fc2, the vocabulary-parallel head) is one
column- or row-parallel layer of known shapes. The probe times that layer's forward and backward
(tpscope.fusion.model.layers' autograd functions, so the backward's weight-gradient overlap is in it)
for every candidate (unfused; chunked and ring at the legal chunk counts, each with the SM
margins of `sm_margins`, the ring off nvlink at two ranks also with its all-gather exchange;
symm_mem and copy_engine on nvlink; host_staged off it) with the ranks aligned, and keeps the fastest of
those that beat unfused clearly: median more than
`MIN_GAIN_RATIO` below unfused's and 90th percentile below unfused's 10th. If none does but the
fastest median is ahead, that contender and unfused are timed again in round-robin pairs, and it
is kept if it took less than 1 - MIN_GAIN_RATIO of unfused's time by the median pair and was
faster in 90 % of the pairs. Otherwise unfused is kept, so that noise does not pick a fusion
that loses (on the `socket` regime a 1 % median rule alone picked chunking that lost 6 % end to
end: docs/benchmarks.md). torch's symm_mem
ops and copy_engine are left out of `shm` and `socket` because they copy over the GPUs' peer link whatever NCCL
is told, which no cross-node link would do (docs/benchmarks.md).

Rank 0 reads and writes the cache (JSON, readable; default ~/.cache/tpscope/auto_probe.json),
keyed by GPU, tp, regime, torch, NCCL and its settings, dtype and the shapes, and broadcasts
the choice.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tpscope.fusion.ops import compat
from tpscope.fusion.run.config import RunConfig
from tpscope.fusion.tuning.timing import sample_regions, summarize, time_region
from tpscope.runfolder.fusion_choice import FusionChoice, parse_label
from tpscope.runfolder.regimes import nccl_env, transport_settings

MIN_GAIN_RATIO = 0.01
PROBE_REPS = 10
PROBE_WARMUP = 3
PROBE_BATCH = 3
"""Layer steps per timed sample, back to back: in training the CPU runs ahead of the GPU, so an
op's CPU-side launch cost is hidden; a sample of one step from an idle GPU would charge it
(docs/benchmarks.md: it cost copy_engine its lead in the probe)."""
REMATCH_PAIRS = 20
"""Round-robin (unfused, contender) pairs timed when no candidate beat unfused clearly but the
fastest median was ahead by more than MIN_GAIN_RATIO. The candidates are timed one after the
other, so a GPU whose clock drifts or a noisy transfer can hide a real gain (on NVLink a probe
kept unfused for fc1 where copy_engine's median was 1.3 % ahead: docs/benchmarks.md);
each pair is timed back to back, and the ratio of the two cancels the drift."""
CHUNK_CANDIDATES = (1, 2, 4, 8)
RING_CHUNK_CANDIDATES = (1, 2, 4, 8)
COPY_CHUNK_CANDIDATES = (1, 2)
HOST_STAGED_CHUNK_CANDIDATES = (1, 2, 4)
HOST_STAGED_REGIMES = ("shm", "socket")
"""Regimes where host_staged is a candidate: those without peer access (tpscope.fusion.ops.host_staged)."""
KINDS = ("attn.qkv", "attn.out", "mlp.fc1", "mlp.fc2", "head")


def default_cache_path() -> Path:
    return (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "tpscope"
        / "auto_probe.json"
    )


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


AUTO_SM_MARGINS = (0, 16)
"""SM margins probed for chunked and ring (a run's own `--sm-margin` is probed too)."""


def sm_margins(cfg: RunConfig) -> tuple[int, ...]:
    """The margins the probe tries: AUTO_SM_MARGINS and the run's own."""
    return tuple(sorted({*AUTO_SM_MARGINS, cfg.fusion.sm_margin}))


UNFUSED = FusionChoice(mode="none").label
"""The baseline's key among a probe's timings (every candidate is keyed by its FusionChoice.label)."""


def candidates(
    local_rows: int, device: torch.device, regime: str, margins: tuple[int, ...] = (0,), tp: int = 2
) -> list[FusionChoice]:
    """Unfused first, then every legal fused variant at each SM margin (off NVLink at two ranks,
    the ring also with its GEMM-RS pieces swapped by all-gather)."""
    out = [FusionChoice(mode="none")]
    exchanges = (False, True) if tp == 2 and regime != "nvlink" else (False,)
    for m in margins:
        out += [
            FusionChoice(mode="chunked", chunks=k, sm_margin=m)
            for k in CHUNK_CANDIDATES
            if local_rows % k == 0
        ]
        out += [
            FusionChoice(mode="ring", chunks=k, sm_margin=m, ring_all_gather=x)
            for k in RING_CHUNK_CANDIDATES
            if local_rows % k == 0
            for x in exchanges
        ]
    if device.type == "cuda" and regime == "nvlink" and compat.symm_mem_ops() is not None:
        out.append(FusionChoice(mode="symm_mem"))
        out += [
            FusionChoice(mode="copy_engine", chunks=k)
            for k in COPY_CHUNK_CANDIDATES
            if local_rows % k == 0
        ]
    if regime in HOST_STAGED_REGIMES:
        out += [
            FusionChoice(mode="host_staged", chunks=k)
            for k in HOST_STAGED_CHUNK_CANDIDATES
            if local_rows % k == 0
        ]
    return out


def _local_rows(specs: dict[str, tuple], tp: int) -> int:
    """The rows per rank of a layer kind's forward op (the AG side's input, the RS side's output)."""
    side, rows = specs["fwd"][:2]
    return rows if side == "ag" else rows // tp


def _layer_step(
    specs: dict[str, tuple],
    device: torch.device,
    dtype: torch.dtype,
    tp: int,
    template: FusionChoice,
) -> Callable[[FusionChoice], Any]:
    """Forward and backward of the layer kind whose forward op is `specs["fwd"]`, under a choice
    (its resource options taken from `template`)."""
    from tpscope.fusion.model.layers import AllGatherMatmulFn, MatmulReduceScatterFn, op_group

    side, rows, k, n = specs["fwd"]
    x = torch.randn(rows, k, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(k, n, device=device, dtype=dtype, requires_grad=True)
    out_rows = rows * tp if side == "ag" else rows // tp
    grad = torch.randn(out_rows, n, device=device, dtype=dtype)
    fn = AllGatherMatmulFn if side == "ag" else MatmulReduceScatterFn

    def step(c: FusionChoice) -> None:
        # not the exchange
        c = replace(c, comm_ctas=template.comm_ctas, bwd_overlap=template.bwd_overlap)
        x.grad = w.grad = None
        fn.apply(x, w, op_group(None, c), c, "auto.probe").backward(grad)

    return step


def probe_kind(
    specs: dict[str, tuple],
    choices: list[FusionChoice],
    device: torch.device,
    dtype: torch.dtype,
    tp: int,
    template: FusionChoice | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Time forward + backward of each of `choices` (`candidates` for the kind; ms per step,
    PROBE_BATCH steps per sample), then, if `contender` names one, the paired rematch of it
    against unfused (`rematch`); every rank runs it (it is collective). Returns (timings,
    rematch or None)."""
    step = _layer_step(specs, device, dtype, tp, template or FusionChoice())
    timings = _time_candidates(step, choices, device)
    key = contender(timings)
    return timings, (rematch(step, key, device) if key else None)


def _time_candidates(
    step: Callable[[FusionChoice], Any], choices: list[FusionChoice], device: torch.device
) -> dict[str, Any]:
    timings: dict[str, Any] = {}
    for c in choices:
        key = c.label
        try:
            t = time_region(
                lambda c=c: [step(c) for _ in range(PROBE_BATCH)],
                device=device,
                reps=PROBE_REPS,
                warmup=PROBE_WARMUP,
            )
            timings[key] = {
                "median_ms": t.median_ms / PROBE_BATCH,
                "p10_ms": t.p10_ms / PROBE_BATCH,
                "p90_ms": t.p90_ms / PROBE_BATCH,
            }
        except Exception as exc:  # noqa: BLE001 - a mode this build cannot run is not a candidate
            timings[key] = {"error": str(exc).splitlines()[0][:200]}
    return timings


def _clear_winners(timings: dict[str, dict]) -> dict[str, dict]:
    base = timings[UNFUSED]
    return {
        k: v
        for k, v in timings.items()
        if k != UNFUSED
        and "median_ms" in v
        and v["median_ms"] < base["median_ms"] * (1 - MIN_GAIN_RATIO)
        and v["p90_ms"] < base["p10_ms"]
    }


def contender(timings: dict[str, dict]) -> str | None:
    """The candidate worth a paired rematch: none won clearly, and the fastest median is more
    than MIN_GAIN_RATIO below unfused's."""
    if _clear_winners(timings):
        return None
    base = timings[UNFUSED]["median_ms"]
    fused = {k: v["median_ms"] for k, v in timings.items() if k != UNFUSED and "median_ms" in v}
    if not fused:
        return None
    best = min(fused, key=fused.__getitem__)
    return best if fused[best] < base * (1 - MIN_GAIN_RATIO) else None


def rematch(step: Callable[[FusionChoice], Any], key: str, device: torch.device) -> dict[str, Any]:
    """Unfused and the contender `key` timed in REMATCH_PAIRS round-robin pairs; the spread of
    contender / unfused over the pairs."""
    none, rival = FusionChoice(mode="none"), parse_label(key)
    samples = sample_regions(
        {
            UNFUSED: lambda: [step(none) for _ in range(PROBE_BATCH)],
            key: lambda: [step(rival) for _ in range(PROBE_BATCH)],
        },
        device=device,
        reps=REMATCH_PAIRS,
        warmup=1,
    )
    ratio = summarize([c / u for u, c in zip(samples[UNFUSED], samples[key])])
    return {
        "candidate": key,
        "pairs": ratio.reps,
        "median_ratio": ratio.median_ms,
        "p10_ratio": ratio.p10_ms,
        "p90_ratio": ratio.p90_ms,
    }


def decide(
    timings: dict[str, dict], paired: dict[str, Any] | None = None
) -> tuple[FusionChoice, str]:
    """The fastest candidate that beats unfused clearly (median by more than MIN_GAIN_RATIO and
    its p90 below unfused's p10); else the rematched contender if it beat unfused in the pairs
    (median ratio below 1 - MIN_GAIN_RATIO, and faster in at least 90 % of them: p90 ratio
    below 1); else unfused."""
    base = timings[UNFUSED]
    measured = {k: v for k, v in timings.items() if "median_ms" in v}
    clear = _clear_winners(timings)
    if (
        not clear
        and paired
        and paired["median_ratio"] < 1 - MIN_GAIN_RATIO
        and paired["p90_ratio"] < 1
    ):
        return parse_label(paired["candidate"]), (
            f"no candidate beat unfused clearly when timed one after the other; in {paired['pairs']} "
            f"round-robin pairs {paired['candidate']} took {paired['median_ratio']:.3f}x unfused's time "
            f"(p90 {paired['p90_ratio']:.3f}x)"
        )
    if not clear:
        best = min(measured, key=lambda k: measured[k]["median_ms"])
        tail = (
            f"; in {paired['pairs']} round-robin pairs it took {paired['median_ratio']:.3f}x unfused's "
            f"time (p90 {paired['p90_ratio']:.3f}x)"
            if paired
            else ""
        )
        return FusionChoice(mode="none"), (
            f"no candidate beat unfused ({base['median_ms']:.3f} ms fwd+bwd, p10 {base['p10_ms']:.3f}) clearly "
            f"(median -{MIN_GAIN_RATIO:.0%} and p90 < unfused p10); fastest median was {best} "
            f"{measured[best]['median_ms']:.3f} ms{tail}"
        )
    best = min(clear, key=lambda k: clear[k]["median_ms"])
    return parse_label(best), (
        f"fastest of {len(measured)} probed that beat unfused clearly: {best} {clear[best]['median_ms']:.3f} ms "
        f"(p90 {clear[best]['p90_ms']:.3f}) fwd+bwd vs unfused {base['median_ms']:.3f} ms (p10 {base['p10_ms']:.3f})"
    )


CACHE_SCHEMA = 8  # 2: timings with spread, the clear-win rule; 3: layer fwd+bwd, SM margins;
# 4: copy_engine, PROBE_BATCH steps per sample; 5: copy_engine pushes the AG-GEMM shards;
# 6: the ring tapered, and with the all-gather exchange off NVLink; 7: the NCCL settings in
# the key, the ring at 8 pieces, the paired rematch; 8: host_staged off nvlink


def nccl_settings_tag(environ: Mapping[str, str]) -> str:
    """A short hash of the NCCL and torch-NCCL settings in force (regimes.transport_settings):
    a probe measured under other transport settings is not reused."""
    env = transport_settings(nccl_env(environ))
    return hashlib.sha1(json.dumps(env, sort_keys=True).encode()).hexdigest()[:8]


def cache_key(
    cfg: RunConfig,
    tp: int,
    device: torch.device,
    regime: str,
    specs: dict,
    environ: Mapping[str, str] | None = None,
) -> str:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    shapes = ";".join(f"{k}={','.join(map(str, v))}" for k, v in sorted(specs.items()))
    resources = (
        f"margins{','.join(map(str, sm_margins(cfg)))}|ctas{cfg.fusion.comm_ctas}|"
        f"bwd{'on' if cfg.fusion.bwd_overlap else 'off'}"
    )
    env = nccl_settings_tag(os.environ if environ is None else environ)
    return (
        f"v{CACHE_SCHEMA}|{gpu}|tp{tp}|{regime}|torch{torch.__version__}|nccl{compat.nccl_version()}|"
        f"env{env}|{cfg.dtype}|{shapes}|{resources}"
    )


def _read_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def auto_plan(
    cfg: RunConfig,
    tp: int,
    device: torch.device,
    regime: str,
    say: Callable[[str], None] = lambda _line: None,
):
    """(plan, record for the manifest). Collective: every rank must call it. `say` gets a line
    per layer kind: before its probe (which can take minutes on a slow link) and its choice."""
    path = Path(cfg.auto_cache) if cfg.auto_cache else default_cache_path()
    dtype = getattr(torch, cfg.dtype)
    shapes = kind_shapes(cfg, tp)
    keys = {kind: cache_key(cfg, tp, device, regime, shapes[kind]) for kind in KINDS}
    box = [_read_cache(path) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    cache = box[0]
    choices: dict[str, dict] = {}
    plans: dict[str, FusionChoice] = {}
    for kind in KINDS:
        entry = cache.get(keys[kind])
        source = "cache"
        started = time.perf_counter()
        if entry is None:
            cands = candidates(_local_rows(shapes[kind], tp), device, regime, sm_margins(cfg), tp)
            say(f"auto: probing {kind}: {len(cands)} candidates, forward + backward of its shapes")
            timings, paired = probe_kind(
                shapes[kind], cands, device, dtype, tp, cfg.choice("none", 1)
            )
            choice, why = decide(timings, paired)
            entry = {
                "mode": choice.mode,
                "chunks": choice.chunks,
                "sm_margin": choice.sm_margin,
                "ring_all_gather": choice.ring_all_gather,
                "why": why,
                "timings_ms": timings,
                "rematch": paired,
                "probed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            cache[keys[kind]] = entry
            source = "probe"
        choices[kind] = {**entry, "source": source, "key": keys[kind]}
        plans[kind] = replace(
            cfg.choice(entry["mode"], entry["chunks"]),
            sm_margin=entry.get("sm_margin", 0),
            ring_all_gather=entry.get("ring_all_gather", False),
        )
        say(
            f"auto: {kind} -> {plans[kind].label} ("
            + (
                f"probed in {time.perf_counter() - started:.1f} s"
                if source == "probe"
                else f"cached in {path}"
            )
            + ")"
        )
    if dist.get_rank() == 0:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cache, indent=1) + "\n")
        except OSError:
            pass  # a read-only home: the choice still stands, it is only not cached

    def plan(label: str) -> FusionChoice:
        return plans[next(k for k in KINDS if label.endswith(k))]

    return plan, {
        "cache_file": str(path),
        "min_gain_ratio": MIN_GAIN_RATIO,
        "probe_reps": PROBE_REPS,
        "choices": choices,
    }
