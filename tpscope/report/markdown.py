"""The report as GitHub-flavoured Markdown: for a job summary or a pull-request comment."""

from __future__ import annotations

from tpscope.report.build import KernelDelta, Report, RunInfo
from tpscope.report.compare import MetricComparison, Status
from tpscope.report.metric_defs import format_delta, format_value, metric_def

STATUS_MARK = {
    Status.REGRESSED: "❌ regressed",
    Status.WORSE: "⚠️ worse",
    Status.IMPROVED: "✅ improved",
    Status.UNCHANGED: "➖ unchanged",
    Status.UNKNOWN: "❔ unknown",
}
NAME_CHARS = 90


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


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
        text += f" ({c.delta_ratio * 100:+.1f}%)"
    return text


def interval_text(c: MetricComparison) -> str:
    if c.ci_low is None:
        return "n/a" if c.status is Status.UNKNOWN else f"none (n={min(c.n_baseline, c.n_candidate)})"
    unit = metric_def(c.metric).unit
    return f"[{format_delta(c.ci_low, unit)}, {format_delta(c.ci_high, unit)}]"


def comparison_table(report: Report) -> str:
    rows = []
    for c in report.comparisons:
        m = metric_def(c.metric)
        status = STATUS_MARK[c.status] + (f": {c.reason}" if c.status is Status.UNKNOWN else "")
        rows.append([f"{m.label} (`{m.short}`)", format_value(c.baseline_median, m.unit),
                     format_value(c.candidate_median, m.unit), change_text(c), interval_text(c),
                     c.threshold.text if c.threshold else "", status])
    headers = ["metric", "baseline", "candidate", "change", "95% interval of change", "fail on", "status"]
    return table(headers, rows, "lrrrrrl")


def summary_table(report: Report) -> str:
    rows = []
    for s in report.summaries:
        m = metric_def(s.metric)
        rows.append([f"{m.label} (`{m.short}`)", format_value(s.median, m.unit), format_value(s.low, m.unit),
                     format_value(s.high, m.unit), str(s.n) if s.n else (s.missing or "unknown")])
    return table(["metric", "median", "min", "max", "steps"], rows, "lrrrr")


def kernel_table(deltas: tuple[KernelDelta, ...], what: str, alone: bool) -> str:
    if not deltas:
        return f"No {what} took longer per step in the candidate." if not alone else f"No {what}."
    detail = any(d.baseline_detail or d.candidate_detail for d in deltas)
    if alone:
        rows = [[f"`{short_name(d.key)}`", d.activity_class, f"{d.candidate_us:,.1f}"]
                + ([d.candidate_detail or ""] if detail else []) for d in deltas]
        return table([what, "class", "µs per rank and step"] + (["messages per step"] if detail else []),
                     rows, "llr" + ("l" if detail else ""))
    sig = {True: "yes", False: "no (noise)", None: "n/a"}
    rows = [[f"`{short_name(d.key)}`", d.activity_class, f"{d.baseline_us:,.1f}", f"{d.candidate_us:,.1f}",
             f"{d.delta_us:+,.1f}", sig[d.significant]]
            + ([f"{d.baseline_detail or '-'} → {d.candidate_detail or '-'}"] if detail else []) for d in deltas]
    headers = [what, "class", "baseline µs", "candidate µs", "change µs", "outside noise"]
    return table(headers + (["messages per step"] if detail else []), rows, "llrrrl" + ("l" if detail else ""))


def run_line(role: str, info: RunInfo) -> str:
    title = f" ({info.title})" if info.title != info.run_dir else ""
    manifest = "" if info.has_manifest else ", no manifest"
    return (f"- {role}: `{info.run_dir}`{title}: ranks {list(info.ranks)}, "
            f"{len(info.steps)} profiled steps{manifest}")


def render(report: Report) -> str:
    """The whole Markdown document."""
    alone = report.baseline is None
    if alone:
        head = [f"## tpscope report: {report.candidate.title}",
                "",
                "**Report of one run: no baseline given, so no verdict.**",
                "",
                run_line("run", report.candidate),
                "",
                "### Metrics (over profiled steps)",
                "",
                summary_table(report)]
    else:
        v = report.verdict
        mark = "✅" if v.passed else "❌"
        head = [f"## tpscope report: {mark} {'pass' if v.passed else 'regression'}",
                "",
                f"**{v.line}**",
                "",
                run_line("baseline", report.baseline),
                run_line("candidate", report.candidate)]
        if report.config_changes:
            changes = "; ".join(f"{k}: {b} → {c}" for k, b, c in report.config_changes)
            head += ["", f"Changed between the runs (manifest): {cell(changes)}"]
        head += ["",
                 "### Metrics, baseline → candidate",
                 "",
                 comparison_table(report),
                 "",
                 "Medians over steps. The interval is a 95% bootstrap interval of the difference of "
                 "medians; a change whose interval holds 0 is inside the step-to-step noise and never "
                 f"fails. Thresholds: `--fail-on {report.fail_on.spec}`."]
    what = "kernels by GPU time" if alone else "kernels that regressed most"
    body = ["", f"### {what[0].upper() + what[1:]} (µs per rank and step)", "",
            kernel_table(report.kernels, "kernel", alone),
            "", f"### Collectives {'by GPU time' if alone else 'that regressed most'} (µs per rank and step)",
            "", kernel_table(report.collectives, "collective", alone)]
    warnings = [*(report.baseline.warnings if report.baseline else ()), *report.candidate.warnings]
    if warnings:
        body += ["", "<details><summary>Warnings from the trace loader</summary>", ""]
        body += [f"- {cell(w)}" for w in warnings] + ["", "</details>"]
    return "\n".join(head + body) + "\n"
