"""`tpscope analyze [RUN_DIR] [--json] [--reference RUN_DIR]`."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", nargs="?", help="run folder or trace file (default: the bundled sample run)")
    p.add_argument("--json", action="store_true", help="print the JSON document (DESIGN.md) instead of tables")
    p.add_argument("--reference", metavar="RUN_DIR", help="an unfused run: isolated kernel baselines and Flux E")
    p.add_argument("--out", metavar="FILE", help="write the JSON to FILE instead of stdout (with --json)")


def main(args: argparse.Namespace) -> int:
    from tpscope.metrics import analyze_run, as_json
    from tpscope.report import terminal
    from tpscope.samples import default_run
    from tpscope.trace import load_run

    run_dir = args.run_dir or default_run()
    run = load_run(run_dir)
    reference = load_run(args.reference) if args.reference else None
    analysis = analyze_run(run, reference=reference) if reference is not None else analyze_run(run)
    if args.json:
        text = json.dumps(as_json(analysis), indent=1)
        if args.out:
            from pathlib import Path

            Path(args.out).write_text(text + "\n")
        else:
            sys.stdout.write(text + "\n")
    else:
        print(terminal.render(analysis))
    return 0
