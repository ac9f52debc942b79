"""`tpscope calibrate RUN_DIR [--device cuda|cpu] [--samples N] [--per-sample N] [--margins M ...]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tpscope.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="run folder whose GEMM calls to replay (its traces need record_shapes=True)")
    p.add_argument("--device", default="cuda", help="cuda (default: this machine's GPU) or cpu (for tests)")
    p.add_argument("--samples", type=int, default=10, metavar="N", help="timed samples per call and margin (default 10)")
    p.add_argument("--per-sample", type=int, default=5, metavar="N",
                   help="back-to-back calls averaged into one sample (default 5)")
    p.add_argument("--margins", type=int, nargs="+", metavar="M", default=None,
                   help="SM margins to replay at (default: 0 and every margin the run's manifest names)")


def run_margins(manifest: dict | None) -> list[int]:
    """0 and every SM margin of the run's manifest (per fused layer, or the run's own)."""
    margins = {0}
    if manifest:
        layers = manifest.get("fusion_by_layer") or {}
        for m in [manifest.get("sm_margin"), *(v.get("sm_margin") for v in layers.values() if isinstance(v, dict))]:
            if isinstance(m, int) and m > 0:
                margins.add(m)
    return sorted(margins)


def main(args: argparse.Namespace) -> int:
    import torch

    from tpscope.calibrate.replay import time_call
    from tpscope.metrics.calibration import calibration_path, write_calibration
    from tpscope.metrics.gemm import gemm_calls
    from tpscope.trace import load_run

    if args.samples < 1 or args.per_sample < 1:
        raise UserError("--samples and --per-sample must be at least 1")
    if args.margins is not None and any(m < 0 for m in args.margins):
        raise UserError("--margins: an SM margin is a number of SMs, 0 or more")
    if args.device not in ("cuda", "cpu"):
        raise UserError(f"--device {args.device}: expected cuda or cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA GPU here (torch.cuda.is_available() is False)")
    device = torch.device(args.device)
    run_dir = Path(args.run_dir)
    run = load_run(run_dir)
    calls = gemm_calls(run)
    if not calls:
        raise UserError(f"{run_dir}: no GEMM op with Input Dims in its traces (profile with record_shapes=True)")
    margins = args.margins if args.margins is not None else run_margins(run.manifest)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    entries, skipped = [], []
    for call in calls:
        for m in margins:
            times = time_call(call, device, m, args.samples, args.per_sample)
            if times is None:
                skipped.append(call.shape.label)
                break
            s = call.shape
            entries.append({"op": call.op, "dims": call.dims, "strides": call.strides, "types": call.types,
                            "batch": s.batch, "m": s.m, "k": s.k, "n": s.n, "dtype": s.dtype, "sm_margin": m,
                            "times_us": times})
            print(f"{call.op:16} {s.label:28} margin {m:3}  median {sorted(times)[len(times) // 2]:10.1f} µs")
    path = calibration_path(run_dir)
    write_calibration(path, run_dir, name, entries)
    for label in sorted(set(skipped)):
        print(f"skipped {label}: its dtype cannot be replayed")
    print(f"{len(entries)} isolated GEMM timings on {name} -> {path} (tpscope analyze {run_dir} uses them)")
    return 0
