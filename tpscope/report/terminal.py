"""Plain-text tables of an analysis for the terminal."""

from __future__ import annotations

import io
from collections.abc import Sequence

from tpscope.metrics import RunAnalysis
from tpscope.metrics.contention_rank import FLOOR_TEXT, distinct_labels, ranked_kernels
from tpscope.numbers import number, size_text
from tpscope.text import printable


def fmt(value: float | None, kind: str = "us") -> str:
    """A number for a table (tpscope.numbers.number): µs without the unit (the column says it), ratios
    as percentages ("pct"), factors ("x"), None as '-'."""
    return number(value, {"pct": "ratio"}.get(kind, kind), with_unit=False)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    title: str = "",
    left: Sequence[int] = (0,),
) -> str:
    """A text table drawn by rich: columns in `left` left-aligned, the others right-aligned. Cells
    are plain text (no rich markup) and printable: names from traces send no escape sequence to
    the terminal."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    t = Table(
        title=Text(printable(title)) if title else None,
        title_justify="left",
        title_style="",
        header_style="",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for i, h in enumerate(headers):
        t.add_column(Text(h), justify="left" if i in left else "right", no_wrap=True)
    for r in rows:
        t.add_row(*(Text(printable(c)) for c in r))
    console = Console(
        file=io.StringIO(), width=100_000, color_system=None, highlight=False, emoji=False
    )
    console.print(t)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines()).strip("\n")


def step_table(analysis: RunAnalysis) -> str:
    headers = [
        "rank/step",
        "step_us",
        "compute_us",
        "comm_us",
        "hidden_us",
        "exposed_us",
        "memory_us",
        "idle_us",
        "exposed",
        "overlap",
        "hidden/hideable",
        "wait_us",
        "transfer_us",
    ]
    rows = [
        [
            f"{s.rank}/{s.step}{'*' if s.first_step else ''}",
            fmt(s.step_time_us),
            fmt(s.compute_us),
            fmt(s.comm_us),
            fmt(s.hidden_comm_us),
            fmt(s.exposed_comm_us),
            fmt(s.memory_us),
            fmt(s.idle_us),
            fmt(s.exposed_comm_ratio, "pct"),
            fmt(s.overlap_ratio, "pct"),
            fmt(s.hidden_of_hideable_ratio, "pct"),
            fmt(s.comm_wait_us),
            fmt(s.comm_transfer_us),
        ]
        for s in analysis.steps
    ]
    return table(headers, rows, "Per rank and step (metrics.md §4)")


def critical_path_table(analysis: RunAnalysis) -> str:
    """The critical path of each step across ranks, by part (metrics.md §7)."""
    headers = [
        "step",
        "length_us",
        "span_us",
        "compute_us",
        "comm_us",
        "memory_us",
        "host_us",
        "idle_us",
        "exposed",
        "inferred",
        "ranks",
    ]
    rows = [
        [
            f"{p.step}{'*' if p.first_step else ''}",
            fmt(p.length_us),
            fmt(p.span_us),
            fmt(p.compute_us),
            fmt(p.comm_us),
            fmt(p.memory_us),
            fmt(p.host_us),
            fmt(p.idle_us),
            fmt(p.exposed_comm_ratio, "pct"),
            fmt(p.inferred_share, "pct"),
            ",".join(map(str, p.ranks)),
        ]
        for p in analysis.critical_path
    ]
    out = table(headers, rows, "Critical path across ranks per step (metrics.md §7)")
    worst = max(analysis.critical_path, key=lambda p: p.host_us, default=None)
    if worst is not None and worst.host_ops_us:
        ops = ", ".join(f"{name} {fmt(us)}" for name, us in list(worst.host_ops_us.items())[:4])
        out += f"\nhost time on the path of step {worst.step} by CPU op or user range (µs): {ops}"
    return out


def collectives_table(analysis: RunAnalysis, top: int = 8) -> str:
    """The collective instances that expose the most time, with their wait and transfer (§5)."""
    worst = sorted(analysis.collectives, key=lambda c: c.exposed_us, reverse=True)[:top]
    headers = [
        "step/key",
        "group",
        "size",
        "ranks",
        "exposed_us",
        "wait_us",
        "skew_us",
        "transfer_us",
        "busbw_GB/s",
    ]
    rows = [
        [
            f"{c.step}/{c.key}",
            _group_text(c),
            size_text(c.bytes) if c.bytes is not None else "-",
            ",".join(map(str, c.ranks)),
            fmt(c.exposed_us),
            fmt(c.wait_us),
            fmt(c.skew_us),
            fmt(c.transfer_us),
            fmt(c.busbw_gbps, "gbps"),
        ]
        for c in worst
    ]
    title = f"Collectives exposing the most time ({len(worst)} of {len(analysis.collectives)} matched; §5)"
    return table(headers, rows, title)


def _group_text(c) -> str:
    """The process group of a collective row ("inferred" when matched by order alone, metrics.md §5)."""
    return "inferred" if c.inferred else _shorten(c.group, 32) or "-"


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _signature_label(signature: str, name_width: int = 32, dims_width: int = 48) -> str:
    """`name|grid|block|input dims` -> a short name, the grid and the input dims (shapes apart),
    the dims cut at `dims_width` (a multi-tensor kernel lists every tensor it touches)."""
    parts = signature.split("|")
    name = _shorten(parts[0].removeprefix("void "), name_width)
    extra = [p for p in (parts[1:2] + parts[3:4]) if p and not p.endswith("=")]
    return " ".join(
        [name, *(_shorten(p, dims_width) if p.startswith("dims=") else p for p in extra)]
    )


def contention_table(analysis: RunAnalysis, top: int = 5) -> str:
    """Kernel signatures whose slowdown beside communication costs most per rank and step, above
    the floor of significance, and collectives beside compute (§8, "Ranking")."""
    kernels, under = ranked_kernels(analysis.kernel_contention, len(analysis.steps))
    kernels = kernels[:top]
    labels = distinct_labels([_signature_label(k.signature, 200, 200) for k in kernels], 60)
    rows = [
        [
            label,
            str(k.n_isolated),
            str(k.n_overlapped),
            fmt(k.isolated_median_us),
            fmt(k.overlapped_median_us),
            fmt(k.slowdown, "pct"),
            fmt(k.tax_us_per_step),
            k.baseline or "-",
        ]
        for label, k in zip(labels, kernels)
    ]
    rows += [
        [
            f"{c.collective} {size_text(c.bytes) if c.bytes is not None else '? B'}",
            str(c.n_isolated),
            str(c.n_overlapped),
            fmt(c.isolated_transfer_us),
            fmt(c.overlapped_transfer_us),
            fmt(c.slowdown, "pct"),
            "-",
            "own",
        ]
        for c in analysis.comm_contention
        if c.slowdown is not None
    ]
    headers = [
        "kernel / collective",
        "n_iso",
        "n_ovl",
        "iso_us",
        "ovl_us",
        "slowdown",
        "tax_us/step",
        "baseline",
    ]
    out = table(headers, rows, "Contention: isolated versus overlapped medians (metrics.md §8)")
    return out + f"\n{FLOOR_TEXT}" + (f" ({under} signature(s) under it left out)" if under else "")


def gemm_contention_tables(analysis: RunAnalysis) -> str | None:
    """The GEMM time budget, the most taxed shapes and layers (metrics.md §8)."""
    from tpscope.report.gemm_contention import (
        FLOOR_LINE,
        budget_lines,
        gemm_view,
        part_rows,
        shape_rows,
    )

    view = gemm_view(analysis)
    if view is None:
        return None
    return "\n\n".join(
        [
            table(*shape_rows(view), "GEMM contention by shape (metrics.md §8)")
            + "\n"
            + FLOOR_LINE,
            table(*part_rows(view.layers, "layer/op"), "GEMM tax by layer"),
            table(*part_rows(view.kernels, "kernel"), "GEMM tax by kernel"),
            "\n".join(budget_lines(view)),
        ]
    )


def summary_table(analysis: RunAnalysis) -> str:
    s = analysis.summary
    rows = [
        ["step time (mean over steps of the slowest rank)", fmt(s.step_time_us) + " µs"],
        ["exposed communication", fmt(s.exposed_comm_ratio, "pct")],
        ["overlap (hidden / all communication)", fmt(s.overlap_ratio, "pct")],
        ["hidden / hideable communication", fmt(s.hidden_of_hideable_ratio, "pct")],
        ["critical-path exposed communication", fmt(s.critical_path_exposed_comm_ratio, "pct")],
        ["contention slowdown", fmt(s.contention_slowdown, "pct")],
        ["overlapped GEMM time with an isolated baseline", fmt(s.contention_coverage, "pct")],
        ["tokens/s (manifest)", fmt(s.tokens_per_s)],
    ]
    if s.flux_overlap_efficiency is not None or s.attained_saving is not None:
        rows += [
            ["Flux overlap efficiency vs reference", fmt(s.flux_overlap_efficiency, "pct")],
            ["attained saving vs reference", fmt(s.attained_saving, "pct")],
        ]
    return table(["summary", "value"], rows)


FINDINGS_SHOWN = 6
WRAP = 110


def findings_section(analysis: RunAnalysis, headroom=None) -> str:
    """What matters in the run, by time per step, in words (tpscope.metrics.findings), with the
    what-if headroom (a tpscope.metrics.headroom.Headroom) last when one is given."""
    import textwrap

    from tpscope.metrics import as_json
    from tpscope.metrics.findings import findings, headroom_finding

    found = findings(as_json(analysis))[:FINDINGS_SHOWN]
    if headroom is not None:
        found.append(headroom_finding(headroom.what, headroom.speedup))
    if not found:
        return ""
    lines = ["What matters in this run, by time per step (the first profiled step left out)"]
    for k, f in enumerate(found, 1):
        lines.append(
            textwrap.fill(
                f"{k}. {f.title}. {f.text}",
                WRAP,
                subsequent_indent="   ",
            )
        )
    return "\n".join(lines)


def render(analysis: RunAnalysis, extra_sections: Sequence[str] = (), headroom=None) -> str:
    """The whole terminal report (`headroom`: the run's what-if bound, tpscope.metrics.headroom)."""
    rules = sorted(set(analysis.step_rule.values()))
    head = f"run: {analysis.run_dir}   ranks: {analysis.ranks}   steps from: {', '.join(rules) or '-'} (metrics.md §3)"
    if analysis.cpu_run:
        head += (
            "\nCPU run: no GPU activity, so gloo collectives and the waits for them are the "
            "communication, the self time of CPU ops the compute, each CPU thread a lane "
            "(metrics.md §1)"
        )
    parts = [head]
    found = findings_section(analysis, headroom)
    if found:
        parts.append(found)
    parts.append(step_table(analysis))
    if any(s.first_step for s in analysis.steps):
        parts[-1] += "\n* the first profiled step: shown, left out of the summary" + (
            " (included: --include-first-step)" if analysis.first_step_included else ""
        )
    if analysis.critical_path:
        parts.append(critical_path_table(analysis))
    if analysis.collectives:
        parts.append(collectives_table(analysis))
    if any(k.slowdown is not None for k in analysis.kernel_contention) or any(
        c.slowdown is not None for c in analysis.comm_contention
    ):
        parts.append(contention_table(analysis))
    gemm = gemm_contention_tables(analysis)
    if gemm:
        parts.append(gemm)
    if any(analysis.clock_offsets_us.values()):
        residual = getattr(analysis, "clock_residual_us", {}) or {}

        def offset(r, o):
            res = residual.get(r)
            return f"rank {r}: {fmt(o)}" + (f" ± {fmt(res)}" if res is not None else "")

        parts.append(
            "clock offsets (µs, ± the residual, metrics.md §6): "
            + ", ".join(offset(r, o) for r, o in analysis.clock_offsets_us.items())
        )
    parts += [*extra_sections, summary_table(analysis)]
    if analysis.warnings:
        parts.append("warnings:\n" + "\n".join(f"  - {w}" for w in analysis.warnings))
    return printable("\n\n".join(parts), keep_newlines=True)


def runs_table(root, names: Sequence[str], analyses: Sequence[RunAnalysis]) -> str:
    """One line per run of a folder of runs (metrics.md §4, "Summary over a run")."""
    rows = [
        [
            name,
            ",".join(map(str, a.ranks)),
            str(len({s.step for s in a.steps})),
            fmt(a.summary.step_time_us),
            fmt(a.summary.exposed_comm_ratio, "pct"),
            fmt(a.summary.overlap_ratio, "pct"),
            fmt(a.summary.critical_path_exposed_comm_ratio, "pct"),
            "CPU" if a.cpu_run else "GPU",
        ]
        for name, a in zip(names, analyses)
    ]
    headers = ["run", "ranks", "steps", "step_us", "exposed", "overlap", "cp_exposed", "device"]
    return table(headers, rows, f"Runs in {root}")


def next_steps(run_dir: str, many: bool = False) -> str:
    """What to run after `tpscope analyze RUN_DIR`."""
    if many:
        rows = [
            [f"tpscope dash {run_dir}", "every run of the folder in the dashboard"],
            [
                f"tpscope report {run_dir}/CANDIDATE --baseline {run_dir}/BASELINE",
                "compare two of them",
            ],
        ]
        return table(["next", "does"], rows, left=(0, 1))
    rows = [
        [f"tpscope dash {run_dir}", "explore it: timeline, critical path, collectives"],
        [
            f"tpscope analyze {run_dir} --reference UNFUSED_RUN",
            "isolated kernel baselines and Flux overlap efficiency",
        ],
        [f"tpscope report {run_dir} --baseline OTHER_RUN", "did a change help? a verdict for CI"],
    ]
    return table(["next", "does"], rows, left=(0, 1))
