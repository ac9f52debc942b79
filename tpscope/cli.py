"""The `tpscope` command: parse, call, print. Each subcommand's work lives in its room.

Subcommand modules are imported only when that subcommand runs, so that `tpscope run` and
`tpscope bench` work on a machine with torch alone (no dash, plotly or HTA).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
import traceback

from tpscope import __version__
from tpscope.allocator import pad_the_heap
from tpscope.errors import UserError
from tpscope.text import printable

# subcommand -> (module that owns it, one-line help). The module provides
# `add_arguments(parser)` and `main(args) -> int`; it must import nothing heavy at module level.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "analyze": (
        "tpscope.report.analyze_command",
        "metrics of a run folder (terminal table or JSON)",
    ),
    "report": ("tpscope.report.report_command", "comparison report for CI; exit 1 on a regression"),
    "whatif": (
        "tpscope.report.whatif_command",
        "predict step time and tokens/s under changes (fuse, link, comm) from one run",
    ),
    "dash": ("tpscope.dashboards.dash_command", "the interactive dashboard on run folders"),
    "export": (
        "tpscope.export.export_command",
        "a step as a Chrome/Kineto trace with tpscope's tracks, for Perfetto",
    ),
    "run": ("tpscope.fusion.run.command", "instrumented fused-TP training; writes a run folder"),
    "bench": (
        "tpscope.fusion.tuning.bench_command",
        "fused AG-GEMM / GEMM-RS microbenchmark (GPU)",
    ),
    "sweep": (
        "tpscope.fusion.run.sweep_command",
        "one change at a time against an unfused baseline",
    ),
    "calibrate": (
        "tpscope.calibrate.calibrate_command",
        "replay a run's GEMMs alone on this GPU (contention baselines)",
    ),
}


EXIT_CODES = """exit status: 0 success (report: pass), 1 a regression (report) or a failed rank (run),
2 a mistake in the input or the options (one line on stderr), 3 an internal error (one line on
stderr naming the file that holds the details; never a verdict)"""
EXIT_INTERNAL = 3


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command's parser; with `only` (a subcommand), that subcommand's alone: the others'
    modules are not imported (`run`'s options, for one, are read from its config's source)."""
    parser = argparse.ArgumentParser(
        prog="tpscope",
        description="How much of a tensor-parallel training step is communication that nothing hides.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"tpscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a room not present in this checkout or install
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=EXIT_CODES)
        module.add_arguments(p)
        p.set_defaults(_main=module.main, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    pad_the_heap()  # numpy's big temporaries reuse freed pages (tpscope/allocator.py)
    given = sys.argv[1:] if argv is None else argv
    parser = build_parser(given[0] if given and given[0] in SUBCOMMANDS else None)
    args, extra = parser.parse_known_args(argv)
    value = _json_value(given, extra)
    if value is not None:  # `--json FILE`: --json takes no value in any command
        print(
            f"tpscope {args.command}: error: --json is a flag (it prints the JSON) and takes no "
            f"file ({printable(value)}); write the file with --out DIR",
            file=sys.stderr,
        )
        return 2
    if extra:  # named by the subcommand's own usage, not the top level's
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    try:
        return int(args._main(args) or 0)
    except UserError as exc:
        print(f"tpscope {args.command}: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tpscope {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:  # a bug of ours: one line and where the traceback went, never a verdict
        details = write_details(args.command)
        print(
            f"tpscope {args.command}: internal error ({sys.exc_info()[1]!r:.200}); details in {details}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _json_value(argv: list[str], extra: list[str]) -> str | None:
    """The word right after `--json` when argparse left it over (a file name given to the flag)."""
    for option, word in zip(argv, argv[1:]):
        if option == "--json" and word in extra:
            return word
    return None


def write_details(command: str) -> str:
    """Write the current exception's traceback to a file in the system temp folder; its path."""
    text = f"tpscope {command}, {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\nargv: {sys.argv}\n\n{traceback.format_exc()}"
    try:
        fd, path = tempfile.mkstemp(prefix="tpscope-error-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        return path
    except OSError:
        return "(none: the temp folder is not writable)"


if __name__ == "__main__":
    sys.exit(main())
