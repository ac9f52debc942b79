"""`tpscope analyze [RUN_DIR] [--json] [--reference RUN_DIR]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tpscope.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", nargs="?", help="run folder or trace file (default: the bundled sample run)")
    p.add_argument("--json", action="store_true",
                   help="print the JSON document (fields: docs/metrics.md) instead of tables")
    p.add_argument("--reference", metavar="RUN_DIR", help="an unfused run: isolated kernel baselines and Flux E")
    p.add_argument("--out", metavar="FILE", help="write the JSON to FILE instead of stdout (with --json)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--align", choices=("auto", "none", "all"), default="auto",
                   help="clock alignment across ranks (metrics.md §6): auto aligns ranks of different hosts, "
                        "none trusts the trace clocks, all aligns every rank")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes that decode traces (default: every usable core)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="where the per-rank map runs: local (a process pool on this machine) or ray (Ray tasks; "
                        "pip install 'tpscope[ray]'; RUN_DIR must be a path or fsspec URL every worker sees)")
    p.add_argument("--address", metavar="ADDR",
                   help="with --engine ray: the Ray cluster (host:port, ray://host:port or auto; default: start a "
                        "local one)")
    p.add_argument("--include-first-step", action="store_true",
                   help="count the first profiled step in the summary's means (it is a warm-up: left out by "
                        "default, metrics.md §3)")
    p.add_argument("--no-cache", action="store_true",
                   help="analyze from the traces even if this folder was analyzed before")


def analyze_folder(run_dir: Path | str, reference: Path | None, workers: int | None, use_cache: bool,
                   align: str = "auto", include_first_step: bool = False, engine: str = "local",
                   address: str | None = None):
    """The analysis of `run_dir`, from the disk cache when the folder and the code are unchanged."""
    from tpscope.metrics import analyze_run
    from tpscope.trace import load_run

    def compute():
        if sys.stderr.isatty():
            print(f"tpscope: reading {run_dir} ...", file=sys.stderr, flush=True)
        run = load_run(run_dir, workers=workers, engine=engine, address=address,
                       progress=_progress if engine == "ray" else None)
        ref = load_run(reference, workers=workers) if reference is not None else None
        return analyze_run(run, reference=ref, align=align, include_first_step=include_first_step)

    if not use_cache or isinstance(run_dir, str):  # a URL: no folder fingerprint to key the cache
        return compute()
    from tpscope.cache import DiskCache

    cache = DiskCache()
    kind = f"analysis-{align}{'-first' if include_first_step else ''}"
    if reference is not None:
        kind += f"-vs-{cache.key('reference', reference)}"
    if not run_dir.exists() or (reference is not None and not reference.exists()):
        return compute()  # the loader names what is missing
    return cache.get_or_compute(kind, run_dir, compute)


def _progress(done: int, total: int) -> None:
    """Ranks read so far, on stderr: one updating line on a terminal, every tenth otherwise."""
    if sys.stderr.isatty():
        end = "\n" if done == total else ""
        print(f"\rtpscope: {done}/{total} ranks read", end=end, file=sys.stderr, flush=True)
    elif done == total or done % max(1, total // 10) == 0:
        print(f"tpscope: {done}/{total} ranks read", file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    from tpscope.samples import default_run

    if args.out and not args.json:
        raise UserError("--out writes the JSON document: add --json")
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not args.overwrite:
        raise UserError(f"{out}: already exists; pass --overwrite to replace it")
    if args.address and args.engine != "ray":
        raise UserError("--address names a Ray cluster: add --engine ray")
    run_dir = Path(args.run_dir) if args.run_dir and "://" not in args.run_dir else (args.run_dir or default_run())
    reference = Path(args.reference) if args.reference else None
    analysis = analyze_folder(run_dir, reference, args.workers, use_cache=not args.no_cache, align=args.align,
                              include_first_step=args.include_first_step, engine=args.engine,
                              address=args.address)
    if args.json:
        from tpscope.metrics import as_json

        text = json.dumps(as_json(analysis), indent=1) + "\n"
        if out is not None:
            out.write_text(text)
        else:
            sys.stdout.write(text)
    else:
        from tpscope.report import terminal

        print(terminal.render(analysis))
    return 0
