"""`tpscope bench`: the fused AG-GEMM / GEMM-RS microbenchmark (docs/runtime.md, "`tpscope bench`").

Starts torchrun on this node (or joins one the user started) and runs tpscope.fusion.tuning.bench on
every rank; rank 0 prints the table and writes the JSON. No torch until `main` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

from tpscope.errors import UserError
from tpscope.fusion.tuning.bench_config import BENCH_DEFAULTS, BenchConfig
from tpscope.fusion.tuning.shapes import SHAPES
from tpscope.outputs import add_out_options
from tpscope.runfolder.fusion_choice import CUDA_ONLY_MODES, FIXED_MODES, Regime

PRESETS = tuple(SHAPES)


def _csv(kind):
    def parse(text: str):
        try:
            return tuple(
                kind(v) for v in text.split(";" if kind is str and ";" in text else ",") if v
            )
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a list of {kind.__name__}: {text!r}") from None

    return parse


def _shown(values: tuple) -> str:
    return ",".join(str(int(v) if isinstance(v, bool) else v) for v in values)


D = BENCH_DEFAULTS
OUT_NAME = "bench.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options; every default is BenchConfig's (bench_config.BENCH_DEFAULTS)."""
    parser.add_argument(
        "--shape",
        action="append",
        default=None,
        help=f"a preset ({', '.join(PRESETS)}) or S,H,F; repeat for more (default {_shown(D['shapes'])})",
    )
    parser.add_argument(
        "--sides", type=_csv(str), default=D["sides"], help=f"ag,rs (default {_shown(D['sides'])})"
    )
    parser.add_argument(
        "--modes",
        type=_csv(str),
        default=D["modes"],
        help=f"fused modes to time besides unfused (default {_shown(D['modes'])}; "
        "on --device cpu the CUDA-only symm_mem and copy_engine are left out)",
    )
    parser.add_argument(
        "--chunks",
        type=_csv(int),
        default=D["chunks"],
        help=f"chunk counts (default {_shown(D['chunks'])})",
    )
    parser.add_argument(
        "--ring-chunks",
        type=_csv(int),
        default=D["ring_chunks"],
        help="transfers per ring step, and pieces per peer for copy_engine and host_staged, to time "
        f"(default {_shown(D['ring_chunks'])})",
    )
    parser.add_argument(
        "--rank-order",
        action="store_true",
        default=D["rank_order"],
        help="also time chunked AG-GEMM in rank order (not own shard first)",
    )
    parser.add_argument(
        "--sm-margins",
        type=_csv(int),
        default=D["sm_margins"],
        help=f"SM margins to time chunked and ring with, e.g. 0,8,16 (default {_shown(D['sm_margins'])})",
    )
    parser.add_argument(
        "--comm-ctas",
        type=_csv(int),
        default=D["comm_ctas"],
        help="CTA caps of the fused ops' communicator, e.g. 0,4 "
        f"(default {_shown(D['comm_ctas'])}; 0: NCCL's choice)",
    )
    parser.add_argument(
        "--taper",
        type=_csv(int),
        default=None,
        help="chunked and ring with more than one chunk: 0 even pieces, 1 the exposed piece "
        "(AG's last, RS's first) halved; e.g. 0,1 times both (default: ring tapers, "
        "chunked does not)",
    )
    parser.add_argument(
        "--ring-all-gather",
        type=_csv(int),
        default=D["ring_all_gather"],
        help="ring GEMM-RS at two ranks: 0 swap pieces by send/recv, 1 by all-gather; "
        f"e.g. 0,1 times both (default {_shown(D['ring_all_gather'])})",
    )
    parser.add_argument(
        "--copy-push",
        type=_csv(int),
        default=D["copy_push"],
        help="copy_engine AG-GEMM: 1 push the shards, 0 pull them; e.g. 0,1 times both "
        f"(default {_shown(D['copy_push'])})",
    )
    parser.add_argument(
        "--feed-ahead-ms",
        type=float,
        default=D["feed_ahead_ms"],
        help="GPU time queued before each timed call, so that the CPU's launch time is "
        "not counted, as in training, where the CPU runs ahead (default %(default)s; 0 counts it)",
    )
    parser.add_argument(
        "--reps",
        type=int,
        default=D["reps"],
        help="timed repetitions (default %(default)s; >= 20 for results)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=D["warmup"],
        help="untimed repetitions first (default %(default)s)",
    )
    parser.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default=D["dtype"],
        help="element type of the GEMMs and collectives (default %(default)s)",
    )
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=D["device"],
        help="cuda (one GPU per rank) or cpu (gloo; checks the modes run, times nothing "
        "worth comparing); default %(default)s",
    )
    parser.add_argument(
        "--nproc", type=int, default=2, help="ranks on this node (default %(default)s)"
    )
    parser.add_argument(
        "--regime",
        choices=[r.value for r in Regime],
        default=D["regime"],
        help="NCCL environment (default: keep the inherited one)",
    )
    add_out_options(parser, OUT_NAME, "the results")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the results as the JSON document instead of the table",
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=D["timeout_s"],
        help="collective timeout (default %(default)s s)",
    )


def _check_gpus(device: str, nproc: int) -> None:
    """One GPU per rank: refuse, before any rank starts, more ranks than GPUs torch sees."""
    if nproc < 2:
        raise UserError(
            f"--nproc {nproc}: the benchmark times collectives between ranks, so it needs 2 or more"
        )
    if device != "cuda":
        return
    import torch

    seen = torch.cuda.device_count()
    if nproc > seen:
        raise UserError(
            f"--nproc {nproc} needs {nproc} GPUs (one per rank) but torch sees {seen}; "
            "run it where two GPUs are visible, or use --device cpu"
        )


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """The BenchConfig of parsed options; a bad option is a UserError."""
    from tpscope.fusion.tuning.shapes import parse_shape

    shapes = tuple(args.shape or D["shapes"])
    try:
        for s in shapes:
            parse_shape(s)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for m in args.modes:
        if m not in FIXED_MODES:
            raise UserError(f"--modes: {m!r} is not one of {', '.join(FIXED_MODES)}")
    for side in args.sides:
        if side not in ("ag", "rs"):
            raise UserError(f"--sides: {side!r} is not ag or rs")
    if args.device == "cpu":
        cpu_modes = tuple(m for m in args.modes if m not in CUDA_ONLY_MODES)
        if not cpu_modes:
            raise UserError(f"--modes {','.join(args.modes)} needs --device cuda")
        args.modes = cpu_modes
    if args.reps < 1 or args.warmup < 0:
        raise UserError("--reps must be >= 1 and --warmup >= 0")
    if any(n < 0 for n in (*args.sm_margins, *args.comm_ctas)):
        raise UserError("--sm-margins and --comm-ctas must be >= 0")
    for name in ("taper", "ring_all_gather", "copy_push"):
        values = getattr(args, name)
        if values is not None and (not values or any(v not in (0, 1) for v in values)):
            raise UserError(f"--{name.replace('_', '-')} takes 0 and/or 1, e.g. 0,1")
    if not 0 <= args.feed_ahead_ms <= 1000:
        raise UserError("--feed-ahead-ms must be between 0 and 1000")
    return BenchConfig(
        shapes=shapes,
        sides=tuple(args.sides),
        modes=tuple(args.modes),
        chunks=tuple(args.chunks),
        ring_chunks=tuple(args.ring_chunks),
        rank_order=args.rank_order,
        sm_margins=tuple(args.sm_margins),
        comm_ctas=tuple(args.comm_ctas),
        copy_push=tuple(bool(p) for p in args.copy_push),
        tapers=D["tapers"] if args.taper is None else tuple(bool(t) for t in args.taper),
        ring_all_gather=tuple(bool(x) for x in args.ring_all_gather),
        feed_ahead_ms=args.feed_ahead_ms,
        reps=args.reps,
        warmup=args.warmup,
        dtype=args.dtype,
        device=args.device,
        regime=args.regime,
        json_path=_json_path(args),
        print_json=args.json,
        timeout_s=args.timeout_s,
    )


def _json_path(args: argparse.Namespace) -> str:
    """The file `--out DIR` names (DIR/bench.json), checked before any rank starts; "" without."""
    if not args.out:
        return ""
    from pathlib import Path

    from tpscope.outputs import make_folder, out_file_in_folder

    path = out_file_in_folder(Path(args.out), OUT_NAME, args.overwrite)
    make_folder(path.parent)
    return os.path.abspath(path)


def main(args: argparse.Namespace) -> int:
    from tpscope.fusion.launch.torchrun import exit_now, inside_torchrun, launch

    cfg = config_from_args(args)
    command = ["tpscope", *sys.argv[1:]]
    if inside_torchrun(os.environ):
        from tpscope.fusion.tuning.bench import run_bench

        # a rank of the user's torchrun ends here (launch.exit_now)
        exit_now(run_bench(cfg, command))
    _check_gpus(args.device, args.nproc)
    rc = launch(
        args.nproc,
        "tpscope.fusion.tuning.bench",
        ["--config-json", json.dumps(asdict(cfg)), "--command-json", json.dumps(command)],
        cfg.regime,
    )
    return 0 if rc == 0 else 1
