"""`tpscope export RUN_DIR [--step N] [--ranks 0,1] [--out DIR] [--overwrite]`: a step as traces for
Perfetto and HTA, one file per rank in a new folder."""

from __future__ import annotations

import argparse
import re
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
        "--out",
        metavar="DIR",
        help="the folder to write, one trace file per rank (default: RUN_DIR-export-step-N beside "
        "the run folder)",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace --out when it holds an earlier export"
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
    from tpscope.export.chrome_trace import rank_traces, trace_file_name, trace_text
    from tpscope.metrics import analyze_run, as_json
    from tpscope.metrics.per_activity import activity_detail
    from tpscope.outputs import replace_folder
    from tpscope.trace import load_run

    path = Path(args.run_dir)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    if args.out:
        _refuse_the_run(Path(args.out), path)
    run = load_run(path)
    analysis = analyze_run(run)
    doc = as_json(analysis)
    ranks = _ranks(args.ranks, [r.rank for r in run.ranks])
    steps = sorted({int(s["step"]) for s in doc["steps"]})
    step = None
    if not args.all_steps:
        if args.step is None:  # the slowest after the first (a warm-up, metrics.md §3)
            first = {int(x["step"]) for x in doc["steps"] if x.get("first_step")}
            steady = [s for s in steps if s not in first or doc.get("first_step_included")]
            step = (
                max(
                    steady or steps,
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
    traces = rank_traces(
        run,
        activity_detail(run),
        step,
        ranks,
        doc.get("clock_offsets_us"),
        analysis.kernel_contention,
    )
    if not traces:
        raise UserError(f"{path}: {_suffix(step)} has no activity on ranks {_list(ranks)}")
    out = Path(args.out) if args.out else default_out(path, step)
    _refuse_the_run(out, path)
    files = {trace_file_name(r, t): trace_text(t) for r, t in traces.items()}
    replace_folder(out, files, args.overwrite, is_export_file, "--out")
    n = sum(1 for t in traces.values() for e in t["traceEvents"] if e["ph"] == "X")
    print(
        f"tpscope export: {out} ({len(files)} rank files, {n:,} events, {_suffix(step)}, "
        f"ranks {_list(list(traces))}); open a file at https://ui.perfetto.dev or "
        "chrome://tracing, or the folder with HTA or tpscope"
    )
    return 0


def _list(ranks) -> str:
    return ", ".join(map(str, ranks))


def default_out(path: Path, step: int | None) -> Path:
    """A new folder beside the run folder (a file's run folder is the one holding it), never in it."""
    root = path.resolve() if path.is_dir() else path.resolve().parent
    return root.parent / f"{root.name}-export-{_suffix(step)}"


def _refuse_the_run(out: Path, path: Path) -> None:
    """--out may not be the run's folder, inside it, or a folder holding it."""
    from tpscope.errors import UserError

    root = path.resolve() if path.is_dir() else path.resolve().parent
    target = out.resolve()
    if target == root or root in target.parents or target in root.parents:
        raise UserError(
            f"--out {out}: the run's own folder, inside it or holding it; choose a folder beside it"
        )


EXPORT_NAME = re.compile(r"^rank\d+\.\d+\.pt\.trace\.json$")


def is_export_file(p: Path) -> bool:
    """A file an earlier `tpscope export` wrote (its name, and its header naming tpscope)."""
    if not EXPORT_NAME.match(p.name):
        return False
    try:
        with p.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"traceName": "tpscope export' in head


def _suffix(step: int | None) -> str:
    return "all-steps" if step is None else f"step-{step}"
