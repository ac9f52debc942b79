"""`tpscope calibrate RUN_DIR` (read the run's GEMM calls and replay them), or in two halves where the
GPU machine lacks the analyzer's libraries: `tpscope calibrate RUN_DIR --plan-out PLAN` (read the
calls, anywhere) and `tpscope calibrate --plan PLAN` (replay them, on the GPU; torch only)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tpscope.errors import UserError
from tpscope.runfolder.manifest import Manifest
from tpscope.text import printable

# the operands of one replayed call may take at most this much memory (A and B together): past it a
# plan's dims are no GEMM a GPU holds, and are refused before any allocation
MAX_OPERAND_BYTES = 1 << 42  # 4 TiB


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dir",
        nargs="?",
        help="run folder whose GEMM calls to replay (its traces need record_shapes=True)",
    )
    p.add_argument(
        "--device", default="cuda", help="cuda (default: this machine's GPU) or cpu (for tests)"
    )
    p.add_argument(
        "--samples",
        type=int,
        default=10,
        metavar="N",
        help="timed samples per call and margin (default 10)",
    )
    p.add_argument(
        "--per-sample",
        type=int,
        default=5,
        metavar="N",
        help="back-to-back calls averaged into one sample (default 5)",
    )
    p.add_argument(
        "--margins",
        type=int,
        nargs="+",
        metavar="M",
        default=None,
        help="SM margins to replay at (default: 0 and every margin the run's manifest names)",
    )
    p.add_argument(
        "--plan-out",
        metavar="FILE",
        help="only write the run's GEMM calls to FILE (no GPU needed), for --plan on the GPU machine",
    )
    p.add_argument(
        "--plan",
        metavar="FILE",
        help="replay the calls of a --plan-out FILE instead of reading RUN_DIR",
    )


def run_margins(manifest: Manifest | None) -> list[int]:
    """0 and every SM margin of the run's manifest (per fused layer, or the run's own)."""
    margins = {0}
    if manifest is not None:
        layers = manifest.fusion_by_layer or {}
        for m in [
            manifest.sm_margin,
            *(v.get("sm_margin") for v in layers.values() if isinstance(v, dict)),
        ]:
            if isinstance(m, int) and m > 0:
                margins.add(m)
    return sorted(margins)


def run_plan(run_dir: Path) -> dict:
    """The run's distinct GEMM calls, its calibration key and its SM margins (reads the traces)."""
    from tpscope.calibrate.read import run_key
    from tpscope.calibrate.store import PLAN_VERSION
    from tpscope.metrics.gemm import gemm_calls
    from tpscope.trace import load_run

    run = load_run(run_dir)
    calls = gemm_calls(run)
    if not calls:
        raise UserError(
            f"{run_dir}: no GEMM op with Input Dims in its traces (profile with record_shapes=True)"
        )
    return {
        "version": PLAN_VERSION,
        "run_dir": str(run_dir),
        "key": run_key(run_dir),
        "margins": run_margins(run.manifest),
        "calls": [
            {"op": c.op, "dims": c.dims, "strides": c.strides, "types": c.types} for c in calls
        ],
    }


def operand_bytes(call) -> int:
    """Bytes of the call's A and B as recorded (`Input Dims`, 8 bytes an element at most)."""
    from tpscope.gemm_shapes import GEMM_OPERANDS

    dims = json.loads(call.dims)
    ia, ib, _ = GEMM_OPERANDS[call.op]
    total = 0
    for i in (ia, ib):
        n = 1
        for x in dims[i]:
            n *= int(x)
        total += 8 * n
    return total


def read_plan(path: Path) -> tuple[dict, list]:
    """A plan file and its GEMM calls (standard library only)."""
    from tpscope.calibrate.store import is_key
    from tpscope.gemm_shapes import GemmCall

    try:
        plan = json.loads(path.read_text())
        calls = [
            GemmCall.of(c["op"], c["dims"], c.get("strides", ""), c.get("types", ""))
            for c in plan["calls"]
        ]
        margins = [int(m) for m in plan["margins"]]
        str(plan["key"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"--plan {path}: not a plan written by `tpscope calibrate --plan-out` ({exc})"
        ) from None
    if not calls or None in calls:
        raise UserError(f"--plan {path}: holds no GEMM calls, or calls that are no GEMM")
    if not is_key(plan["key"]):
        raise UserError(
            f"--plan {path}: key {printable(repr(plan['key']))[:80]} is not a calibration key "
            "(32 hex digits, as `tpscope calibrate --plan-out` writes)"
        )
    check_sizes(calls, f"--plan {path}")
    return {**plan, "margins": margins}, calls


def check_sizes(calls: list, source: str) -> None:
    """Refuse calls whose operands no machine holds (one line naming `source` and the call)."""
    for call in calls:
        need = operand_bytes(call)
        if need > MAX_OPERAND_BYTES:
            raise UserError(
                f"{source}: GEMM {printable(call.shape.label)} needs {need:,} bytes for its operands "
                f"(more than {MAX_OPERAND_BYTES:,}); its dims are no GEMM to replay"
            )


def replay(
    plan: dict,
    calls: list,
    device_name: str,
    margins: list[int],
    samples: int,
    per_sample: int,
    source: str = "",
) -> int:
    """Time every call at every margin and write the calibration (torch only)."""
    import torch

    from tpscope.calibrate.replay import time_call
    from tpscope.calibrate.store import calibration_file, write_calibration

    if device_name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA GPU here (torch.cuda.is_available() is False)")
    device = torch.device(device_name)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    entries, skipped = [], []
    for call in calls:
        for m in margins:
            try:
                times = time_call(call, device, m, samples, per_sample)
            except (RuntimeError, TypeError, OverflowError, MemoryError) as exc:
                if not is_allocation_error(exc):
                    raise
                raise UserError(
                    f"{source}: GEMM {printable(call.shape.label)} cannot be allocated on "
                    f"{device_name} ({printable(str(exc).splitlines()[0])[:200]})"
                ) from None
            if times is None:
                skipped.append(call.shape.label)
                break
            s = call.shape
            entries.append(
                {
                    "op": call.op,
                    "dims": call.dims,
                    "strides": call.strides,
                    "types": call.types,
                    "batch": s.batch,
                    "m": s.m,
                    "k": s.k,
                    "n": s.n,
                    "dtype": s.dtype,
                    "sm_margin": m,
                    "times_us": times,
                }
            )
            print(
                f"{printable(call.op):16} {printable(s.label):28} margin {m:3}  median {sorted(times)[len(times) // 2]:10.1f} µs"
            )
    path = calibration_file(plan["key"])
    write_calibration(path, plan["run_dir"], name, entries)
    for label in sorted(set(skipped)):
        print(f"skipped {printable(label)}: its dtype cannot be replayed")
    print(
        f"{len(entries)} isolated GEMM timings on {printable(name)} -> {path} "
        f"(tpscope analyze {printable(str(plan['run_dir']))} uses them)"
    )
    return 0


def is_allocation_error(exc: BaseException) -> bool:
    """An operand too large for the device (torch's out-of-memory and size-overflow errors)."""
    if isinstance(exc, (MemoryError, OverflowError)):
        return True
    text = str(exc)
    return any(
        w in text
        for w in ("allocate", "out of memory", "overflow", "Overflow", "invalid size", "too large")
    )


def main(args: argparse.Namespace) -> int:
    from tpscope.calibrate.store import write_json

    if args.samples < 1 or args.per_sample < 1:
        raise UserError("--samples and --per-sample must be at least 1")
    if args.margins is not None and any(m < 0 for m in args.margins):
        raise UserError("--margins: an SM margin is a number of SMs, 0 or more")
    if args.device not in ("cuda", "cpu"):
        raise UserError(f"--device {args.device}: expected cuda or cpu")
    if (args.plan is None) == (args.run_dir is None):
        raise UserError("give a RUN_DIR or --plan FILE (one of the two)")
    if args.plan is not None and args.plan_out is not None:
        raise UserError("--plan-out writes a plan from RUN_DIR; it does not go with --plan")
    if args.plan is not None:
        plan, calls = read_plan(Path(args.plan))
        source = f"--plan {args.plan}"
    else:
        from tpscope.gemm_shapes import GemmCall

        plan = run_plan(Path(args.run_dir))
        if args.plan_out is not None:
            write_json(Path(args.plan_out), plan)
            print(
                f"{len(plan['calls'])} GEMM calls, margins {plan['margins']} -> {args.plan_out} "
                f"(replay them on the GPU: tpscope calibrate --plan {args.plan_out})"
            )
            return 0
        calls = [GemmCall.of(c["op"], c["dims"], c["strides"], c["types"]) for c in plan["calls"]]
        source = str(args.run_dir)
        check_sizes(calls, source)
    margins = args.margins if args.margins is not None else plan["margins"]
    return replay(plan, calls, args.device, margins, args.samples, args.per_sample, source)
