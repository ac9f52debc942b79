"""`tpscope whatif RUN [CHANGE...]`: the run's dependency graph replayed, unchanged (the identity)
and with each change (metrics.md §11)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tpscope.errors import UserError
from tpscope.outputs import add_out_options, out_file_in_folder, write_into_folder

OUT_NAME = "whatif.json"

CHANGES_HELP = """changes (metrics.md §11): comm=FACTOR[@GROUP|KIND] scales transfers;
link=GBPS[,LAT_US][@GROUP|KIND] times them by an α-β model (LAT_US default: the run's fitted α);
hide=all|GROUP|KIND sets them to zero (the upper bound); fuse=MODE[:CHUNKS][:no-bwd][@LAYERS]
replaces each AG-GEMM / GEMM-RS pair by a chunk pipeline (MODE: chunked, ring, copy_engine,
host_staged; the backward's weight gradient beside the transfers as the runtime runs it, unless
no-bwd);
contention=off runs every overlapped GEMM at its isolated time. KIND: all_gather, reduce_scatter,
all_reduce, all_to_all, broadcast, send_recv; GROUP: a process group's name or [ranks], or a text
of its description (any case); several targets comma-separated (@all_gather,reduce_scatter; fuse=:
@block0,head)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (p.description or "") + ". " + CHANGES_HELP
    p.add_argument("run_dir", help="run folder or trace file")
    p.add_argument("changes", nargs="*", metavar="CHANGE", help="changes to predict (see above)")
    p.add_argument(
        "--json",
        action="store_true",
        help=f"the JSON document instead of tables: printed, or with --out only written to DIR/{OUT_NAME}",
    )
    add_out_options(p, OUT_NAME)
    p.add_argument(
        "--contention-from",
        metavar="RUN_DIR",
        help="a fused run of the same regime: the GEMM slowdown beside a transfer (per shape, per "
        "kind of transfer) and the chunk transfers' α-β fit that fuse= uses",
    )
    p.add_argument(
        "--align", choices=("auto", "none", "all"), default="auto", help="clock alignment (§6)"
    )
    p.add_argument("--workers", type=int, default=None, metavar="N", help="decoding processes")


def whatif_folder(
    run_dir: Path,
    texts: list[str],
    contention_from: Path | None = None,
    align: str = "auto",
    workers: int | None = None,
):
    """The WhatIf of `run_dir` under the changes `texts` (a bad one: UserError naming it)."""
    from tpscope.calibrate.read import calibration_path, read_calibration
    from tpscope.metrics.whatif import contention_source, predict, prepare
    from tpscope.metrics.whatif_changes import ChangeError, parse_change
    from tpscope.trace import load_run

    try:
        changes = [parse_change(t) for t in texts]
    except ChangeError as exc:
        raise UserError(str(exc)) from None
    run = load_run(run_dir, workers=workers)
    inp = prepare(run, align)
    contention, extra = None, None
    if contention_from is not None:
        try:
            other_run = load_run(contention_from, workers=workers)
        except UserError as exc:
            raise UserError(f"--contention-from {exc}") from None
        other = prepare(other_run, align)
        contention = contention_source(other, inp, str(contention_from))
        if contention is None:
            raise UserError(
                f"--contention-from {contention_from}: no GEMM beside communication with an "
                "isolated baseline (metrics.md §8) to measure the slowdown on; name a fused run "
                "of the same regime"
            )
        extra = other.samples
    cal = calibration_path(run_dir) if isinstance(run_dir, Path) else None
    calibration = read_calibration(cal)[0] if cal is not None and cal.exists() else None
    tps = run.manifest.tokens_per_s if run.manifest is not None else None
    try:
        return predict(inp, changes, contention, calibration, extra, tps)
    except ChangeError as exc:
        raise UserError(str(exc)) from None


def main(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be >= 1, not {args.workers}")
    out = out_file_in_folder(Path(args.out), OUT_NAME, args.overwrite) if args.out else None
    ref = Path(args.contention_from) if args.contention_from else None
    if ref is not None and not ref.exists():
        raise UserError(f"--contention-from {ref}: no such file or folder")
    w = whatif_folder(Path(args.run_dir), args.changes, ref, args.align, args.workers)
    if args.json or out is not None:
        from tpscope.jsonable import dumps

        text = dumps(as_json(w)) + "\n"
        if out is not None:
            write_into_folder(out, text)
            print(f"tpscope whatif: wrote {out}", file=sys.stderr)
        else:
            print(text, end="")
        if args.json:
            return 0
    from tpscope.report.whatif_terminal import render

    print(render(w))
    return 0


def as_json(w) -> dict:
    from tpscope.jsonable import plain

    return plain(w)


def headroom_line(h) -> str | None:
    """`report`'s line for a `tpscope.metrics.headroom.Headroom` (metrics.md §11); None for none."""
    if h is None:
        return None
    return (
        f"hiding {h.what}: at most {h.speedup:.2f}x (tpscope whatif {' '.join(h.changes)}; the "
        "replayed graph, metrics.md §11)"
    )
