"""`tpscope report CANDIDATE [--baseline RUN] [--format md,json,junit,html] [--out DIR] [--fail-on SPEC]`.

Exit 0: pass (or a report of one run); 1: a gated metric regressed; 2: a usage or input error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

FORMATS = {
    "md": "report.md",
    "json": "report.json",
    "junit": "report.junit.xml",
    "html": "report.html",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "candidate",
        nargs="?",
        metavar="CANDIDATE",
        help="run folder to judge (default: the bundled sample run)",
    )
    p.add_argument(
        "--baseline",
        metavar="RUN_DIR",
        help="run folder to compare against; without it, a report of the candidate alone",
    )
    p.add_argument(
        "--format",
        metavar="LIST",
        help=f"comma-separated, of {','.join(FORMATS)} (default: md to stdout; all with --out)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write report.md, report.json, report.junit.xml, report.html here",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace report files that already exist in --out"
    )
    p.add_argument(
        "--fail-on",
        metavar="SPEC",
        dest="fail_on",
        help="thresholds, e.g. step_time=+3%%,exposed_comm_ratio=+0.02,tokens_per_s=-3%%,"
        "peak_memory=+5%% (these are the defaults; METRIC=off drops one), and bounds on "
        "the candidate, e.g. peak_memory<=75GiB,tokens_per_s>=50000",
    )
    p.add_argument(
        "--loss-rtol",
        metavar="RTOL",
        dest="loss_rtol",
        help="largest relative difference of a step's loss from the baseline's before the "
        "candidate fails, when both trained the same model (default: 1e-5 float32, "
        "2e-2 bfloat16; off: do not compare)",
    )


def parse_loss_rtol(text: str | None) -> float | None:
    """`--loss-rtol`: None (by dtype), -1 for `off`, or a finite number >= 0."""
    from tpscope.errors import UserError

    if text is None:
        return None
    if text.strip().lower() == "off":
        return -1.0
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0 and value != float("inf")):
        raise UserError(f"--loss-rtol: {text!r} is not a number >= 0 (e.g. 1e-5) or off")
    return value


def parse_formats(text: str | None, has_out: bool) -> list[str]:
    from tpscope.errors import UserError

    if not text:
        return list(FORMATS) if has_out else ["md"]
    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise UserError(
            f"--format: unknown format {', '.join(unknown) or repr(text)}; choose from "
            f"{', '.join(FORMATS)}"
        )
    if len(formats) > 1 and not has_out:
        raise UserError("--format with several formats needs --out DIR (stdout takes one)")
    return list(dict.fromkeys(formats))


def output_paths(out: str, formats: list[str], overwrite: bool) -> dict[str, Path]:
    """Where each format goes; refuses to replace an existing report unless `overwrite`."""
    from tpscope.errors import UserError
    from tpscope.outputs import check_out_folder

    folder = Path(out)
    check_out_folder(folder)
    paths = {f: folder / FORMATS[f] for f in formats}
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise UserError(
            f"{existing[0]} already exists; pass --overwrite to replace the report "
            "or choose another --out"
        )
    return paths


def render(report, fmt: str) -> str:
    if fmt == "md":
        from tpscope.report import markdown

        return markdown.render(report)
    if fmt == "json":
        import json

        from tpscope.report.json_doc import as_json

        return json.dumps(as_json(report), indent=1) + "\n"
    if fmt == "junit":
        from tpscope.report import junit

        return junit.render(report)
    from tpscope.report import html

    return html.render(report)


def main(args: argparse.Namespace) -> int:
    from tpscope.report.compare import parse_fail_on

    formats = parse_formats(args.format, bool(args.out))
    fail_on = parse_fail_on(args.fail_on)
    loss_rtol = parse_loss_rtol(getattr(args, "loss_rtol", None))
    paths = output_paths(args.out, formats, args.overwrite) if args.out else {}
    if args.out:
        from tpscope.outputs import check_not_inside
        from tpscope.samples import default_run

        check_not_inside(
            Path(args.out) / FORMATS[formats[0]], [args.candidate or default_run(), args.baseline]
        )
    report = build(args.candidate, args.baseline, fail_on, loss_rtol)
    check_comparable(report)
    from tpscope.outputs import make_folder, write_stdout, write_text

    if not paths:
        write_stdout(render(report, formats[0]))
        return report.exit_code
    texts = {fmt: render(report, fmt) for fmt in paths}  # all rendered before any is written
    make_folder(next(iter(paths.values())).parent)
    for fmt, path in paths.items():
        write_text(path, texts[fmt])
    line = report.verdict.line if report.verdict else "report of one run (no baseline): no verdict"
    from tpscope.text import printable

    print(printable(line))
    print(printable("wrote " + ", ".join(str(p) for p in paths.values())))
    return report.exit_code


def check_comparable(report) -> None:
    """A run without step time (no GPU activity in any step) cannot be judged: an input error,
    not a pass."""
    from tpscope.errors import UserError
    from tpscope.report.compare import Status

    st = next((c for c in report.comparisons if c.metric == "step_time_us"), None)
    if st is not None and st.status is Status.UNKNOWN:
        run = report.candidate.run_dir if st.candidate_median is None else report.baseline.run_dir
        raise UserError(f"{run}: no GPU activity in any step window, so no step time to compare")


def refuse_unfinished(runs) -> None:
    """A verdict compares finished runs: one whose manifest says it did not finish is an input
    error (its steps and losses stop early; alone, `report` shows it with a warning)."""
    from tpscope.errors import UserError
    from tpscope.text import printable

    for run in runs:
        m = run.manifest
        if m is not None and not m.finished:
            why = printable(m.stopped or "no reason recorded")
            raise UserError(
                f"{run.path}: the run did not finish ({why}); a verdict needs a finished run "
                "(report it without --baseline to see what it holds)"
            )


def build(candidate: str | None, baseline: str | None, fail_on, loss_rtol: float | None = None):
    """Load, analyze and compare (trace -> metrics -> report)."""
    from pathlib import Path

    from tpscope.calibrate.read import calibration_path, read_calibration
    from tpscope.metrics import analyze_run
    from tpscope.metrics.kernel_stats import by_collective, kernel_names, kernel_times
    from tpscope.report.build import RunResults, build_report
    from tpscope.samples import default_run
    from tpscope.trace import load_run

    def results(run, reference=None) -> RunResults:
        from tpscope.progress import working

        # the candidate's GEMM baselines (metrics.md §8) also come from the baseline run and from
        # a `tpscope calibrate` of the candidate, when there is one
        cal = calibration_path(Path(run.path))
        samples = read_calibration(cal)[0] if cal.exists() else None
        with working(f"tpscope: analyzing {run.path}"):
            return RunResults(
                analyze_run(run, reference=reference, calibration=samples),
                # metrics.md §9: renames compare; §3: the first profiled step left out
                kernel_times(run, "shape", leave_out_first_step=True),
                by_collective(kernel_times(run, "collective", leave_out_first_step=True)),
                kernel_names(run),
            )

    def read(path):
        from tpscope.progress import working

        with working(f"tpscope: reading {path}"):
            return load_run(path)

    base_run = read(baseline) if baseline is not None else None
    cand_run = read(candidate or default_run())
    if base_run is not None:
        refuse_unfinished([cand_run, base_run])
    cand = results(cand_run, base_run)
    base = results(base_run) if base_run is not None else None
    if base is not None and base.analysis.cpu_run != cand.analysis.cpu_run:
        from tpscope.errors import UserError

        cpu, gpu = (base, cand) if base.analysis.cpu_run else (cand, base)
        raise UserError(
            f"{cpu.analysis.run_dir} is a CPU run and {gpu.analysis.run_dir} a GPU run: "
            "compare runs of one kind"
        )
    import dataclasses

    from tpscope.metrics.findings import headroom_finding
    from tpscope.metrics.headroom import headroom
    from tpscope.report.whatif_command import headroom_line

    report = build_report(cand, fail_on, base, loss_rtol)
    room = headroom(cand_run)
    if room is None:
        return report
    return dataclasses.replace(
        report,
        headroom=headroom_line(room),
        findings=(*report.findings, headroom_finding(room.what, room.speedup)),
    )
