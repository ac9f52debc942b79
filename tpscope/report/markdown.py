"""The report as GitHub-flavoured Markdown: for a job summary or a pull-request comment."""

from __future__ import annotations

from tpscope.metrics.contention_rank import FLOOR_TEXT, distinct_labels
from tpscope.numbers import number
from tpscope.report.build import KernelDelta, Report, RunInfo
from tpscope.report.collective_table import CollectiveDelta
from tpscope.report.compare import MetricComparison, Status
from tpscope.report.gemm_contention import FLOOR_LINE, budget_lines, part_rows, shape_rows
from tpscope.report.metric_defs import format_delta, format_value, metric_def
from tpscope.text import md_code, md_text, printable

STATUS_MARK = {
    Status.REGRESSED: "❌ regressed",
    Status.WORSE: "⚠️ worse",
    Status.IMPROVED: "✅ improved",
    Status.UNCHANGED: "➖ unchanged",
    Status.UNKNOWN: "❔ unknown",
}
NAME_CHARS = 90
FINDINGS_SHOWN = 6


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell (no control characters, no unescaped pipe)."""
    return printable(text.replace("\n", " ")).replace("|", "\\|")


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def table(headers: list[str], rows: list[list[str]], align: str) -> str:
    """A Markdown table; `align` holds one letter per column: l or r."""
    marks = {"l": "---", "r": "---:"}
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def change_text(c: MetricComparison) -> str:
    unit = metric_def(c.metric).unit
    text = format_delta(c.delta, unit)
    if c.delta_ratio is not None and unit != "ratio":
        text += f" ({number(c.delta_ratio, 'relative')})"
    return text


def interval_text(c: MetricComparison) -> str:
    if c.ci_low is None:
        return (
            "n/a" if c.status is Status.UNKNOWN else f"none (n={min(c.n_baseline, c.n_candidate)})"
        )
    unit = metric_def(c.metric).unit
    return f"[{format_delta(c.ci_low, unit)}, {format_delta(c.ci_high, unit)}]"


COMPARISON_HEADERS = (
    "metric",
    "baseline",
    "candidate",
    "change",
    "95% interval of change",
    "fail on",
    "status",
)
"""The columns of the metric comparison, in the Markdown and the HTML report alike."""


def comparison_table(report: Report) -> str:
    rows = []
    for c in report.comparisons:
        m = metric_def(c.metric)
        status = STATUS_MARK[c.status] + (f": {c.reason}" if c.status is Status.UNKNOWN else "")
        rows.append(
            [
                f"{m.label} (`{m.short}`)",
                format_value(c.baseline_median, m.unit),
                format_value(c.candidate_median, m.unit),
                change_text(c),
                interval_text(c),
                c.gates,
                status,
            ]
        )
    return table(list(COMPARISON_HEADERS), rows, "lrrrrrl")


def summary_table(report: Report) -> str:
    rows = []
    for s in report.summaries:
        m = metric_def(s.metric)
        rows.append(
            [
                f"{m.label} (`{m.short}`)",
                format_value(s.median, m.unit),
                format_value(s.low, m.unit),
                format_value(s.high, m.unit),
                str(s.n) if s.n else (s.missing or "unknown"),
            ]
        )
    return table(["metric", "median", "min", "max", "steps"], rows, "lrrrr")


SIGNIFICANCE = {True: "yes", False: "no (noise)", None: "n/a"}


def _us(value: float | None) -> str:
    return number(value, "us", with_unit=False)


def _pair(b: float | None, c: float | None, fmt=_us) -> str:
    return f"{fmt(b)} → {fmt(c)}"


def kernel_rows(deltas: tuple[KernelDelta, ...], alone: bool) -> tuple[list[str], list[list[str]]]:
    """Headers and plain-text rows of the kernel table (first column: the kernel name)."""
    if alone:
        return (
            ["kernel shape", "class", "µs per rank and step", "kernels"],
            [[d.key, d.activity_class, _us(d.candidate_us), d.kernels] for d in deltas],
        )
    return (
        [
            "kernel shape",
            "class",
            "baseline µs",
            "candidate µs",
            "change µs",
            "outside noise",
            "kernels",
        ],
        [
            [
                d.key,
                d.activity_class,
                _us(d.baseline_us),
                _us(d.candidate_us),
                number(d.delta_us, "us", signed=True, with_unit=False),
                SIGNIFICANCE[d.significant],
                d.kernels,
            ]
            for d in deltas
        ],
    )


def collective_rows(
    deltas: tuple[CollectiveDelta, ...], alone: bool
) -> tuple[list[str], list[list[str]]]:
    """Headers and plain-text rows of the collective table (first column: the collective name)."""

    def get(s, name):
        return getattr(s, name) if s is not None else None

    def gbps(v):
        return number(v, "gbps")

    if alone:
        return (
            [
                "collective",
                "messages per step",
                "exposed µs",
                "transfer µs",
                "wait µs",
                "busbw GB/s",
            ],
            [
                [
                    d.label,
                    d.candidate.messages,
                    _us(d.candidate.exposed_us),
                    _us(d.candidate.transfer_us),
                    _us(d.candidate.wait_us),
                    gbps(d.candidate.busbw_gbps),
                ]
                for d in deltas
            ],
        )
    headers = [
        "collective",
        "messages per step",
        "exposed µs",
        "change",
        "outside noise",
        "transfer µs",
        "wait µs",
        "busbw GB/s",
    ]
    rows = [
        [
            d.label,
            f"{get(d.baseline, 'messages') or '-'} → {get(d.candidate, 'messages') or '-'}",
            _pair(get(d.baseline, "exposed_us"), get(d.candidate, "exposed_us")),
            number(d.delta_exposed_us, "us", signed=True, with_unit=False),
            SIGNIFICANCE[d.significant],
            _pair(get(d.baseline, "transfer_us"), get(d.candidate, "transfer_us")),
            _pair(get(d.baseline, "wait_us"), get(d.candidate, "wait_us")),
            _pair(get(d.baseline, "busbw_gbps"), get(d.candidate, "busbw_gbps"), gbps),
        ]
        for d in deltas
    ]
    return headers, rows


def signature_text(signature: str, limit: int = 48) -> str:
    """A kernel signature (name|grid|block|dims, metrics.md §8) short enough for a table: the name's
    start and the input dims, which tell one GEMM shape from another."""
    name, *rest = signature.split("|")
    dims = next((r for r in rest if r.startswith("dims=")), "")
    return f"{short_name(name, limit)} {dims}".strip()


def contention_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """Headers and plain-text rows of the candidate's compute slowed beside communication."""
    return (
        [
            "kernel signature",
            "overlapped runs",
            "alone µs",
            "beside comm µs",
            "slowdown",
            "cost µs per step",
        ],
        [
            [
                label,
                str(k.n_overlapped),
                _us(k.isolated_median_us),
                _us(k.overlapped_median_us),
                f"{k.slowdown * 100:+.0f}%",
                _us(k.tax_us_per_step),
            ]
            for label, k in zip(
                distinct_labels([signature_text(k.signature, 400) for k in report.contention], 60),
                report.contention,
            )
        ],
    )


def table_md(headers: list[str], rows: list[list[str]]) -> str:
    """A table whose first column is plain text and the others numbers (right-aligned)."""
    return table(headers, rows, "l" + "r" * (len(headers) - 1))


def name_table(
    headers: list[str], rows: list[list[str]], empty: str, limit: int = NAME_CHARS
) -> str:
    if not rows:
        return empty
    # names from traces: inert text
    kernels = headers.index("kernels") if "kernels" in headers else -1
    rows = [
        [
            md_code(short_name(r[0], limit)),
            *(md_text(c) if k + 1 == kernels else c for k, c in enumerate(r[1:])),
        ]
        for r in rows
    ]
    return table(
        headers,
        rows,
        "l"
        + "".join(
            "l" if h in ("class", "outside noise", "messages per step", "kernels") else "r"
            for h in headers[1:]
        ),
    )


def run_line(role: str, info: RunInfo) -> str:
    title = f" ({info.title})" if info.title != info.run_dir else ""
    manifest = ("" if info.has_manifest else ", no manifest") + (
        ", CPU run (gloo, CPU ops)" if info.cpu_run else ""
    )
    first = (
        f" (the first, step {info.first_step}, a warm-up of "
        f"{number(info.first_step_time_us, 'us')}, left out of the medians)"
        if info.first_step is not None and info.first_step_time_us is not None
        else ""
    )
    return (
        f"- {role}: {md_code(info.run_dir)}{md_text(title)}: ranks {list(info.ranks)}, "
        f"{len(info.steps)} profiled step{'' if len(info.steps) == 1 else 's'}{first}{manifest}"
    )


def loss_lines(report: Report) -> list[str]:
    """The loss curves: each run's trend, the comparison, a warning when the candidate's loss did
    not fall (tpscope.report.loss_check)."""
    check = report.loss
    if check is None:
        return []
    lines = ["", "### Loss"]
    if check.diverged:
        lines += [
            "",
            f"**Warning: the {'run' if report.baseline is None else 'candidate'}'s loss did not fall** "
            "(it diverged, or trained too few steps to tell).",
        ]
    lines += [""]
    if report.baseline is not None:
        lines += [f"- baseline: {check.trend_text(check.baseline_trend)}"]
    lines += [
        f"- {'run' if report.baseline is None else 'candidate'}: {check.trend_text(check.candidate_trend)}"
    ]
    if check.line:
        lines += [f"- {'❌ ' if check.failed else ''}{md_text(check.line)}"]
    return lines


def finding_lines(report: Report) -> list[str]:
    """What matters in the candidate, by time per step (tpscope.metrics.findings)."""
    if not report.findings:
        return []
    who = "this run" if report.baseline is None else "the candidate"
    lines = ["", f"### What matters in {who}, by time per step", ""]
    lines += [
        f"{k}. **{md_text(f.title)}.** {md_text(f.text)}"
        for k, f in enumerate(report.findings[:FINDINGS_SHOWN], 1)
    ]
    return lines


def render(report: Report) -> str:
    """The whole Markdown document."""
    alone = report.baseline is None
    if alone:
        head = [
            f"## tpscope report: {md_text(report.candidate.title)}",
            "",
            "**Report of one run: no baseline given, so no verdict.**",
            "",
            run_line("run", report.candidate),
            "",
            "### Metrics (over profiled steps)",
            "",
            summary_table(report),
        ]
        if report.headroom:
            head += ["", f"What-if: {md_text(report.headroom)}."]
    else:
        v = report.verdict
        mark = "✅" if v.passed else "❌"
        head = [
            f"## tpscope report: {mark} {'pass' if v.passed else 'regression'}",
            "",
            f"**{v.line}**",
            "",
            run_line("baseline", report.baseline),
            run_line("candidate", report.candidate),
        ]
        if report.config_changes:
            changes = "; ".join(f"{k}: {b} → {c}" for k, b, c in report.config_changes)
            head += ["", f"Changed between the runs (manifest): {cell(changes)}"]
        head += [
            "",
            "### Metrics, baseline → candidate",
            "",
            comparison_table(report),
            "",
            "Medians over steps. The interval is a 95% bootstrap interval of the difference of "
            "medians; a change whose interval holds 0 is inside the step-to-step noise and never "
            f"fails. Thresholds: `--fail-on {report.fail_on.spec}`.",
        ]
        if report.headroom:
            head += ["", f"What-if (candidate): {md_text(report.headroom)}."]
    body = [*finding_lines(report), *loss_lines(report)]
    body += [
        "",
        f"### Kernels {'by GPU time' if alone else 'that regressed most'}, by shape (µs per rank and step)",
        "",
        "A kernel's shape is the op that launched it and that op's input dims, so that a renamed "
        "variant doing the same work is compared with what it replaced (metrics.md §9).",
        "",
        name_table(
            *kernel_rows(report.kernels, alone),
            "No kernel took longer per step in the candidate." if not alone else "No kernels.",
        ),
        "",
        f"### Collectives {'by exposed time' if alone else 'whose exposed time grew most'} "
        "(µs per step)",
        "",
        name_table(*collective_rows(report.collectives, alone), "No collectives."),
        "",
        "Exposed: kernel time with no compute beside it (the largest over ranks, metrics.md §5); "
        "wait: time a rank's kernel waited for the last rank to arrive; busbw: median over instances.",
    ]
    if report.flux_overlap_efficiency is not None or report.attained_saving is not None:
        body += [
            "",
            f"Against the baseline (meaningful when it is the unfused run, metrics.md §9): Flux overlap "
            f"efficiency {number(report.flux_overlap_efficiency, 'ratio')}, attained saving "
            f"{number(report.attained_saving, 'ratio')}.",
        ]
    if report.contention:
        body += [
            "",
            f"### Compute slowed beside communication ({'run' if alone else 'candidate'}, metrics.md §8)",
            "",
            name_table(*contention_rows(report), "", limit=160),
            "",
            "Median durations of one kernel signature alone and beside communication on another "
            f"stream; the cost is what the slowdown adds per rank and step; {FLOOR_TEXT}.",
        ]
    if report.gemm is not None:
        body += [
            "",
            f"### GEMMs slowed beside transfers ({'run' if alone else 'candidate'}, metrics.md §8)",
            "",
            *(f"- {line}" for line in budget_lines(report.gemm)),
            "",
            table_md(*shape_rows(report.gemm)),
            "",
            FLOOR_LINE,
            "",
            table_md(*part_rows(report.gemm.layers, "layer/op")),
        ]
    warnings = [*(report.baseline.warnings if report.baseline else ()), *report.candidate.warnings]
    if warnings:
        body += ["", "<details><summary>Warnings from the trace loader</summary>", ""]
        body += [f"- {cell(md_text(w))}" for w in warnings] + ["", "</details>"]
    return "\n".join(head + body) + "\n"
