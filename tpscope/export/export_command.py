"""`tpscope export RUN_DIR [--step N] [--ranks 0,1] [-o FILE]`: a step as a trace for Perfetto."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="run folder (or one trace file)")
    p.add_argument(
        "--step",
        type=int,
        help="the step to write (default: the slowest); --all-steps for every step",
    )
    p.add_argument("--all-steps", action="store_true", help="write the whole run, every step")
    p.add_argument("--ranks", metavar="R,R", help="ranks to write, comma-separated (default: all)")
    p.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        help="where to write the JSON (default: RUN_DIR-step-N.json beside the folder; - for stdout)",
    )


def _ranks(text: str | None, known: list[int]) -> list[int]:
    from tpscope.errors import UserError

    if not text:
        return known
    try:
        wanted = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise UserError(f"--ranks {text!r}: not a comma-separated list of rank numbers") from None
    missing = [r for r in wanted if r not in known]
    if missing or not wanted:
        raise UserError(f"--ranks {text!r}: the run has ranks {', '.join(map(str, known))}")
    return wanted


def main(args: argparse.Namespace) -> int:
    from tpscope.errors import UserError
    from tpscope.export.chrome_trace import step_trace
    from tpscope.metrics import analyze_run, as_json
    from tpscope.metrics.per_activity import activity_detail
    from tpscope.trace import load_run

    path = Path(args.run_dir)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    run = load_run(path)
    analysis = analyze_run(run)
    doc = as_json(analysis)
    ranks = _ranks(args.ranks, [r.rank for r in run.ranks])
    steps = sorted({int(s["step"]) for s in doc["steps"]})
    step = None
    if not args.all_steps:
        if args.step is None:
            step = (
                max(
                    steps,
                    key=lambda s: max(x["step_time_us"] for x in doc["steps"] if x["step"] == s),
                )
                if steps
                else None
            )
        elif args.step not in steps:
            raise UserError(
                f"--step {args.step}: the run's steps are {', '.join(map(str, steps)) or 'none'}"
            )
        else:
            step = args.step
    trace = step_trace(
        run,
        activity_detail(run),
        step,
        ranks,
        doc.get("clock_offsets_us"),
        analysis.kernel_contention,
    )
    text = json.dumps(trace, allow_nan=False, separators=(",", ":"))
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = (
        Path(args.out)
        if args.out
        else path.resolve().parent / f"{path.resolve().name}-{_suffix(step)}.json"
    )
    try:
        out.write_text(text)
    except OSError as exc:
        raise UserError(f"-o {out}: cannot write ({exc.strerror or exc})") from None
    n = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    print(
        f"tpscope export: {out} ({n:,} events, {_suffix(step)}, ranks {', '.join(map(str, ranks))}); "
        "open it at https://ui.perfetto.dev or chrome://tracing"
    )
    return 0


def _suffix(step: int | None) -> str:
    return "all-steps" if step is None else f"step-{step}"
