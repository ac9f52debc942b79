"""The fusion microbenchmark of docs/benchmarks.md, run on every rank of a torchrun.

Per shape and side (AG-GEMM: `x [S/tp, H] -> [S, H] @ W1 [H, F/tp]`; GEMM-RS:
`y [S, F/tp] @ W2 [F/tp, H] -> [S/tp, H]`) it times, in one process and side by side: the GEMM
alone, the collective alone, unfused (mode none) and each mode and chunk count. It reports
E = 1 - (T_fused - T_gemm) / (T_unfused - T_gemm) and the attained saving, and checks each fused
output against the unfused one on fresh random inputs (the seed is drawn per run and recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tpscope import __version__
from tpscope.fusion.launch.process import join_group
from tpscope.fusion.launch.torchrun import exit_now
from tpscope.fusion.ops import compat
from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter, resolve_taper
from tpscope.fusion.ops.resources import fusion_group, gemm_sm_margin
from tpscope.fusion.ops.streams import CommStream
from tpscope.fusion.tuning.bench_config import BenchConfig
from tpscope.fusion.tuning.labels import variant_label
from tpscope.fusion.tuning.shapes import SHAPES, parse_shape  # noqa: F401 - re-exported
from tpscope.fusion.tuning.timing import time_regions
from tpscope.metrics.flux import attained_saving, flux_overlap_efficiency
from tpscope.outputs import write_text
from tpscope.runfolder.fusion_choice import CUDA_ONLY_MODES
from tpscope.runfolder.regimes import nccl_env, regime_env

TOLERANCE = {torch.bfloat16: 2e-2, torch.float32: 1e-4}


def variants(
    cfg: BenchConfig, local_rows: int, device: torch.device, side: str = "ag"
) -> list[dict[str, Any]]:
    """The fused variants to time, as dicts of FusionChoice fields (mode, chunks, own_first,
    sm_margin, comm_ctas); chunk counts that do not divide the local rows are left out. own_first
    only changes the AG side of `chunked`; margins and CTA caps apply to `chunked` and `ring`."""
    resources = [{"sm_margin": m, "comm_ctas": c} for c in cfg.comm_ctas for m in cfg.sm_margins]
    out: list[dict[str, Any]] = []
    for mode in cfg.modes:
        if mode == "chunked":
            legal = [k for k in cfg.chunks if local_rows % k == 0]
            orders = [True, False] if cfg.rank_order and side == "ag" else [True]
            out += [
                {
                    "mode": mode,
                    "chunks": k,
                    "own_first": o,
                    **r,
                    **({"taper": resolve_taper(mode, t)} if k > 1 else {}),
                }
                for r in resources
                for o in orders
                for k in legal
                for t in (cfg.tapers if k > 1 else (None,))
            ]
        elif mode == "ring":
            exchanges = cfg.ring_all_gather if side == "rs" else (False,)
            out += [
                {
                    "mode": mode,
                    "chunks": k,
                    "own_first": True,
                    **r,
                    **({"taper": resolve_taper(mode, t)} if k > 1 else {}),
                    **({"all_gather": x} if x else {}),
                }
                for r in resources
                for k in cfg.ring_chunks
                if local_rows % k == 0
                for t in (cfg.tapers if k > 1 else (None,))
                for x in exchanges
            ]
        elif mode in CUDA_ONLY_MODES and device.type != "cuda":
            continue
        elif mode in ("copy_engine", "host_staged"):
            pushes = cfg.copy_push if side == "ag" and mode == "copy_engine" else (None,)
            out += [
                {
                    "mode": mode,
                    "chunks": k,
                    "own_first": True,
                    "sm_margin": 0,
                    "comm_ctas": 0,
                    **({} if p is None else {"push": p}),
                }
                for k in cfg.ring_chunks
                if local_rows % k == 0
                for p in pushes
            ]
        elif mode != "none":
            out.append(
                {"mode": mode, "chunks": 1, "own_first": True, "sm_margin": 0, "comm_ctas": 0}
            )
    return out


def _beside(gemm, comm, device: torch.device, sm_margin: int):
    """The GEMM on the compute stream and the whole collective (if any) on the side stream,
    launched together, the GEMM leaving `sm_margin` SMs free; timed until both are done. Without
    a collective: what the margin costs the GEMM. With one: what an independent GEMM and the
    transfer take at once (as a backward's weight gradient beside its collective), against
    max(GEMM, collective) if they shared the GPU perfectly."""
    side = CommStream(device)

    def both():
        side.follow_compute()
        if comm is not None:
            with side.issue():
                comm()
        with gemm_sm_margin(sm_margin, device):
            gemm()
        side.join()

    return both


def _rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    return float((a.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30))


def bench_side(
    side: str,
    shape: tuple[int, int, int],
    cfg: BenchConfig,
    tp: int,
    rank: int,
    device: torch.device,
    seed: int,
) -> dict[str, Any]:
    """All timings of one side of one shape."""
    s, h, f = shape
    dtype = getattr(torch, cfg.dtype)
    g = torch.Generator(device=device).manual_seed(seed + 7919 * rank)

    def rnd(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=g, device=device, dtype=torch.float32).to(dtype) * 0.1

    if side == "ag":
        a, w = rnd(s // tp, h), rnd(h, f // tp)
        # random like the collective's output: a GEMM over zeros draws less power and runs faster
        gathered = rnd(s, h)

        def gemm():
            return gathered @ w

        def comm():
            return compat.all_gather_single(gathered, a)

        def op(mode, chunks, own_first=True, sm_margin=0, comm_ctas=0, push=True, taper=None):
            # as a layer's forward calls it: the gathered input is kept for the weight gradient
            return all_gather_matmul(
                a,
                w,
                fusion_group(None, comm_ctas),
                mode=mode,
                chunks=chunks,
                label=f"bench.{side}",
                own_first=own_first,
                sm_margin=sm_margin,
                return_gathered=True,
                copy_push=push,
                taper=taper,
            )[0]

        local_rows = s // tp
    else:
        a, w = rnd(s, f // tp), rnd(f // tp, h)
        partial = a @ w
        scattered = torch.empty(s // tp, h, device=device, dtype=dtype)

        def gemm():
            return a @ w

        def comm():
            return compat.reduce_scatter_single(scattered, partial)

        def op(
            mode,
            chunks,
            own_first=True,
            sm_margin=0,
            comm_ctas=0,
            push=True,
            taper=None,
            all_gather=False,
        ):
            return matmul_reduce_scatter(
                a,
                w,
                fusion_group(None, comm_ctas),
                mode=mode,
                chunks=chunks,
                label=f"bench.{side}",
                sm_margin=sm_margin,
                taper=taper,
                ring_all_gather=all_gather,
            )

        local_rows = s // tp
    fns: dict[str, Any] = {"gemm": gemm, "comm": comm, "unfused": lambda: op("none", 1)}
    if device.type == "cuda":
        for margin in cfg.sm_margins:
            fns[f"gemm/m{margin}"] = _beside(gemm, None, device, margin)
            fns[f"gemm||comm/m{margin}"] = _beside(gemm, comm, device, margin)
    reference = op("none", 1)
    rows = []
    for i, v in enumerate(variants(cfg, local_rows, device, side)):
        row: dict[str, Any] = dict(v)
        if not (v["mode"] == "chunked" and side == "ag"):
            row.pop("own_first")
        try:
            err = _rel_err(op(**v), reference)
        except Exception as exc:  # noqa: BLE001 - a mode this build lacks is a result, not a crash
            row.update(error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
        else:
            row.update(max_rel_err=err, ok=err <= TOLERANCE[dtype])
            fns[f"variant{i}"] = lambda v=v: op(**v)
        rows.append((i, row))
    timed = time_regions(
        fns, device=device, reps=cfg.reps, warmup=cfg.warmup, feed_ahead_ms=cfg.feed_ahead_ms
    )
    t_gemm, t_comm, t_unfused = timed["gemm"], timed["comm"], timed["unfused"]
    beside = [
        {
            "sm_margin": m,
            "timing": timed[f"gemm||comm/m{m}"].as_dict(),
            "gemm_alone": timed[f"gemm/m{m}"].as_dict(),
        }
        for m in cfg.sm_margins
        if device.type == "cuda"
    ]
    for i, row in rows:
        t = timed.get(f"variant{i}")
        if t is None:
            continue
        row.update(
            timing=t.as_dict(),
            E=flux_overlap_efficiency(t.median_ms, t_unfused.median_ms, t_gemm.median_ms),
            attained_saving=attained_saving(
                t.median_ms, t_unfused.median_ms, t_gemm.median_ms, t_comm.median_ms
            ),
            speedup_vs_unfused=t_unfused.median_ms / t.median_ms,
        )
    rows = [row for _, row in rows]
    return {
        "side": side,
        "S": s,
        "H": h,
        "F": f,
        "gemm": t_gemm.as_dict(),
        "comm": t_comm.as_dict(),
        "unfused": t_unfused.as_dict(),
        "gemm_beside_comm": beside,
        "variants": rows,
    }


def format_table(results: list[dict[str, Any]], regime: str) -> str:
    """The results as a terminal table (ms are medians; p10-p90 in brackets)."""
    lines = [
        f"regime {regime}",
        f"{'shape S,H,F':<18} {'side':<4} {'variant':<22} {'median ms':>10} "
        f"{'p10-p90':>15} {'E':>6} {'attained':>9} {'check':>7}",
    ]
    for r in results:
        shape = f"{r['S']},{r['H']},{r['F']}"
        timed = [(name, r[name]) for name in ("gemm", "comm", "unfused")]
        for b in r.get("gemm_beside_comm", []):
            timed += [
                (f"gemm/m{b['sm_margin']}", b["gemm_alone"]),
                (f"gemm||comm/m{b['sm_margin']}", b["timing"]),
            ]
        for name, t in timed:
            lines.append(
                f"{shape:<18} {r['side']:<4} {name:<22} {t['median_ms']:>10.3f} "
                f"{t['p10_ms']:>7.3f}-{t['p90_ms']:<7.3f}"
            )
        for v in r["variants"]:
            label = variant_label(v, r["side"])
            if "error" in v:
                lines.append(f"{shape:<18} {r['side']:<4} {label:<22} error: {v['error'][:60]}")
                continue
            t = v["timing"]
            e = "-" if v["E"] is None else f"{v['E']:.2f}"
            att = "-" if v["attained_saving"] is None else f"{v['attained_saving']:.2f}"
            lines.append(
                f"{shape:<18} {r['side']:<4} {label:<22} {t['median_ms']:>10.3f} "
                f"{t['p10_ms']:>7.3f}-{t['p90_ms']:<7.3f} {e:>6} {att:>9} "
                f"{'ok' if v['ok'] else 'WRONG':>7}"
            )
    return "\n".join(lines)


def run_bench(cfg: BenchConfig, command: list[str]) -> int:
    """Every rank: join, measure, and on rank 0 print the table and write the JSON."""
    joined = join_group(cfg.regime, cfg.device, cfg.timeout_s)
    rank, tp, device, regime = joined.rank, joined.world, joined.device, joined.regime
    seed_t = torch.tensor([time.time_ns() % (2**31)], device=device)
    dist.broadcast(seed_t, 0)
    seed = int(seed_t)
    results, all_ok = [], True
    try:
        for name in cfg.shapes:
            shape = parse_shape(name)
            for side in cfg.sides:
                r = bench_side(side, shape, cfg, tp, rank, device, seed)
                r["shape_name"] = name
                results.append(r)
                all_ok &= all(v.get("ok", True) for v in r["variants"])
                if rank == 0 and not cfg.print_json:
                    print(format_table([r], regime).split("\n", 2)[2], flush=True)
        if rank == 0:
            doc = {
                "command": command,
                "tpscope_version": __version__,
                "torch_version": torch.__version__,
                "nccl_version": compat.nccl_version() if device.type == "cuda" else None,
                "cuda_version": torch.version.cuda,
                "gpu_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                "gpu_count": torch.cuda.device_count() if device.type == "cuda" else 0,
                "tp": tp,
                "regime": regime,
                "regime_env": regime_env(regime),
                "nccl_env": nccl_env(os.environ),
                "dtype": cfg.dtype,
                "reps": cfg.reps,
                "warmup": cfg.warmup,
                "seed": seed,
                "timing": "round robin, slowest rank per repetition; "
                + ("cuda events" if device.type == "cuda" else "wall clock")
                + (
                    f"; {cfg.feed_ahead_ms} ms of GPU work queued ahead of each call"
                    if cfg.feed_ahead_ms and device.type == "cuda"
                    else ""
                ),
                "feed_ahead_ms": cfg.feed_ahead_ms if device.type == "cuda" else 0.0,
                "ag_returns_gathered": True,
                "symm_mem_note": None
                if regime == "nvlink"
                else "symm_mem copies over CUDA peer access whatever NCCL is told: not a cross-node baseline",
                "results": results,
                "all_outputs_match_unfused": all_ok,
            }
            if cfg.json_path:
                write_text(Path(cfg.json_path), json.dumps(doc, indent=1) + "\n")
                print(f"tpscope bench: wrote {cfg.json_path}", file=sys.stderr, flush=True)
            if cfg.print_json:
                print(json.dumps(doc, indent=1), flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0 if all_ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config-json", required=True)
    parser.add_argument("--command-json", default="[]")
    args = parser.parse_args(argv)
    raw = json.loads(args.config_json)
    cfg = BenchConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
    return run_bench(cfg, json.loads(args.command_json))


if __name__ == "__main__":
    exit_now(main())
