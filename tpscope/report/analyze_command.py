"""`tpscope analyze [RUN_DIR] [--json] [--reference RUN_DIR]`."""

from __future__ import annotations

import argparse
import importlib
import sys
from contextlib import nullcontext
from pathlib import Path

from tpscope.errors import UserError
from tpscope.outputs import (
    add_out_options,
    check_not_inside,
    out_file_in_folder,
    write_into_folder,
    write_stdout,
)

OUT_NAME = "analysis.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dir",
        nargs="?",
        help="run folder, trace file, or a folder of runs (one subfolder each, "
        "as with tensorboard_trace_handler) (default: the bundled sample run)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="the JSON document (fields: docs/metrics.md) instead of tables: printed, or with --out "
        f"only written to DIR/{OUT_NAME}",
    )
    p.add_argument(
        "--reference",
        metavar="RUN_DIR",
        help="an unfused run: isolated kernel baselines and Flux E",
    )
    add_out_options(p, OUT_NAME)
    p.add_argument(
        "--align",
        choices=("auto", "none", "all"),
        default="auto",
        help="clock alignment across ranks (metrics.md §6): auto aligns ranks of different hosts, "
        "none trusts the trace clocks, all aligns every rank",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="processes (or a big file's reading threads) that decode traces and, from three, "
        "walk a big run's critical paths, a step each; from two, a second thread shares the "
        "array work on one big file (default: every usable core)",
    )
    p.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="where the per-rank map runs: local (a process pool on this machine) or ray (Ray tasks; "
        "pip install 'tpscope[ray]'; RUN_DIR must be a path or fsspec URL every worker sees)",
    )
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="with --engine ray: the Ray cluster (host:port, ray://host:port or auto; default: start a "
        "local one)",
    )
    p.add_argument(
        "--include-first-step",
        action="store_true",
        help="count the first profiled step in the summary's means (it is a warm-up: left out by "
        "default, metrics.md §3)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="analyze from the traces even if this folder was analyzed before",
    )


def analyze_folder(
    run_dir: Path | str,
    reference: Path | None,
    workers: int | None,
    use_cache: bool,
    align: str = "auto",
    include_first_step: bool = False,
    engine: str = "local",
    address: str | None = None,
):
    """The analysis of `run_dir`, from the disk cache when the folder and the code are unchanged."""
    from tpscope.calibrate.read import calibration_path, read_calibration
    from tpscope.trace import load_run
    from tpscope.trace.read.parallel import usable_cores, while_inflating

    calibration = calibration_path(run_dir)  # from `tpscope calibrate`, used when present (§8)
    cache, kind = _cache_and_kind(run_dir, reference, use_cache, align, include_first_step)

    def compute():
        from tpscope.progress import working

        samples = read_calibration(calibration)[0] if calibration.exists() else None
        if engine == "ray":  # the map's own progress: N/M ranks read
            run = load_run(
                run_dir,
                workers=workers,
                engine=engine,
                address=address,
                progress=_progress,
                cache=cache,
            )
        else:  # the analysis' modules loaded while a big file's text is first inflated
            with working(f"tpscope: reading {run_dir}"), while_inflating(_analysis_module):
                run = load_run(run_dir, workers=workers, cache=cache)
        with working(f"tpscope: reading {reference}") if reference is not None else nullcontext():
            ref = load_run(reference, workers=workers) if reference is not None else None
        from tpscope.metrics import analyze_run

        with working(f"tpscope: analyzing {run_dir}"):
            return analyze_run(
                run,
                reference=ref,
                align=align,
                include_first_step=include_first_step,
                calibration=samples,
                workers=usable_cores() if workers is None else max(1, workers),
            )

    if cache is None:
        return compute()
    return cache.get_or_compute(kind, run_dir, compute, expect=_is_analysis)


def _analysis_module():
    """The analysis' modules (`tpscope.metrics`), loaded."""
    return importlib.import_module("tpscope.metrics.analysis")


def _is_analysis(value) -> bool:
    """Whether a cached value is a run's analysis (its module loaded only when one is read)."""
    return isinstance(value, _analysis_module().RunAnalysis)


def _cache_and_kind(
    run_dir: Path | str,
    reference: Path | None,
    use_cache: bool,
    align: str = "auto",
    include_first_step: bool = False,
    **_engine,
):
    """(the disk cache, the kind of entry of this analysis), or (None, None) where nothing is
    cached: asked not to, a URL (no folder to fingerprint), or a folder that is not there (the
    loader names what is missing). Takes `analyze_folder`'s options; the engine's do not matter."""
    if not use_cache or isinstance(run_dir, str):
        return None, None
    if not run_dir.exists() or (reference is not None and not reference.exists()):
        return None, None
    from tpscope.cache import DiskCache
    from tpscope.calibrate.read import calibration_path

    cache = DiskCache()
    kind = f"analysis-{align}{'-first' if include_first_step else ''}"
    if reference is not None:
        kind += f"-vs-{cache.key('reference', reference)}"
    calibration = calibration_path(run_dir)
    if calibration.exists():
        kind += f"-cal-{cache.key('calibration', calibration)}"
    return cache, kind


def json_pieces(
    run_dir: Path | str, reference: Path | None, workers: int | None, use_cache: bool, **options
) -> list[str]:
    """The analysis of `run_dir` (`options` as `analyze_folder` takes them) as `tpscope analyze
    --json` writes it, as pieces that follow one another (joined only where the text is cached:
    the text is cached beside the analysis, so that a folder analyzed before is written again
    without decoding or encoding anything)."""
    from tpscope.jsonable import dumps_pieces

    def compute() -> list[str]:
        analysis = analyze_folder(run_dir, reference, workers, use_cache, **options)
        return dumps_pieces(_analysis_module().json_fields(analysis), end="\n")

    cache, kind = _cache_and_kind(run_dir, reference, use_cache, **options)
    if cache is None:
        return compute()
    text = cache.get_or_compute(f"json-{kind}", run_dir, lambda: "".join(compute()), expect=str)
    return [text]


def _progress(done: int, total: int) -> None:
    """Ranks read so far, on stderr: one updating line on a terminal, every tenth otherwise."""
    if sys.stderr.isatty():
        end = "\n" if done == total else ""
        print(f"\rtpscope: {done}/{total} ranks read", end=end, file=sys.stderr, flush=True)
    elif done == total or done % max(1, total // 10) == 0:
        print(f"tpscope: {done}/{total} ranks read", file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    from tpscope.samples import default_run

    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be >= 1, not {args.workers}")
    out = out_file_in_folder(Path(args.out), OUT_NAME, args.overwrite) if args.out else None
    if args.address and args.engine != "ray":
        raise UserError("--address names a Ray cluster: add --engine ray")
    if args.run_dir and "://" in args.run_dir:  # an fsspec URL: one run, no cache
        run_dir = args.run_dir
    else:
        run_dir = Path(args.run_dir) if args.run_dir else default_run()
    reference = Path(args.reference) if args.reference else None
    if out is not None:
        check_not_inside(out, [run_dir, reference])
    from tpscope.trace import find_runs

    runs = find_runs(run_dir) if isinstance(run_dir, Path) and run_dir.is_dir() else []
    if len(runs) > 1 or (runs and runs[0] != run_dir):  # a folder of runs, one subfolder each
        return _many(run_dir, runs, reference, args, out)
    options = dict(
        use_cache=not args.no_cache,
        align=args.align,
        include_first_step=args.include_first_step,
        engine=args.engine,
        address=args.address,
    )
    if args.json or out is not None:
        _write(json_pieces(run_dir, reference, args.workers, **options), out)
        if args.json:
            return 0
    from tpscope.report import terminal

    analysis = analyze_folder(run_dir, reference, args.workers, **options)
    print(terminal.render(analysis, headroom=_headroom(run_dir, args.workers, options)))
    print()
    print(terminal.next_steps(str(run_dir)))
    return 0


def _headroom(run_dir, workers: int | None, options: dict):
    """The run's what-if headroom (metrics.md §11) for the terminal's findings: the run read again
    (from the per-rank cache when it holds it) and its graph replayed without its TP transfers."""
    from tpscope.metrics.headroom import headroom
    from tpscope.progress import working
    from tpscope.trace import load_run

    if options.get("engine") == "ray":
        return None  # a cluster's run is not read twice
    cache, kind = _cache_and_kind(run_dir, None, options["use_cache"], options["align"], False)

    def compute() -> tuple:
        with working(f"tpscope: replaying {run_dir} (what-if headroom)"):
            return (headroom(load_run(run_dir, workers=workers, cache=cache)),)

    if cache is None:
        return compute()[0]
    # cached beside the analysis (a 1-tuple, so that "no headroom" is a value too)
    return cache.get_or_compute(f"headroom-{kind}", run_dir, compute, expect=_one_tuple)[0]


def _one_tuple(value: object) -> bool:
    return isinstance(value, tuple) and len(value) == 1


def _write(pieces: list[str], out: Path | None) -> None:
    """A document's pieces (`json_pieces`) into the file `out`, else to standard output one
    after another."""
    if out is not None:
        write_into_folder(out, "".join(pieces))
        print(f"tpscope analyze: wrote {out}", file=sys.stderr)
    else:
        for piece in pieces:
            write_stdout(piece)


def _many(
    root: Path, runs: list[Path], reference: Path | None, args: argparse.Namespace, out: Path | None
) -> int:
    """A folder of runs (a TensorBoard log directory): each run analyzed, then one line per run."""
    analyses = [
        analyze_folder(
            r,
            reference,
            args.workers,
            use_cache=not args.no_cache,
            align=args.align,
            include_first_step=args.include_first_step,
        )
        for r in runs
    ]
    if args.json or out is not None:
        from tpscope.jsonable import dumps_pieces
        from tpscope.metrics.analysis import json_fields

        doc = {"runs": {r.name: json_fields(a) for r, a in zip(runs, analyses)}}
        _write(dumps_pieces(doc, end="\n"), out)
        if args.json:
            return 0
    from tpscope.report import terminal

    for a in analyses:
        print(terminal.render(a))
        print()
    print(terminal.runs_table(root, [r.name for r in runs], analyses))
    print()
    print(terminal.next_steps(str(root), many=True))
    return 0
