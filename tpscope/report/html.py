"""The report as one self-contained HTML page: tables and Plotly figures, plotly.js inlined, so the
page needs no network (CI artifacts are often opened offline)."""

from __future__ import annotations

from html import escape as _html_escape
from html import unescape

from tpscope.numbers import number
from tpscope.report.build import KernelDelta, Report
from tpscope.report.compare import Status
from tpscope.report.gemm_contention import FLOOR_LINE, budget_lines, part_rows, shape_rows
from tpscope.report.markdown import (
    COMPARISON_HEADERS,
    change_text,
    collective_rows,
    contention_rows,
    interval_text,
    kernel_rows,
    loss_lines,
    short_name,
)
from tpscope.report.metric_defs import format_value, metric_def
from tpscope.text import escape_figure, printable


def escape(text: str, quote: bool = True) -> str:
    """HTML text with the controls of names from traces and manifests written out."""
    return _html_escape(printable(str(text), keep_newlines=True), quote)


STATUS_CLASS = {
    Status.REGRESSED: "bad",
    Status.WORSE: "warn",
    Status.IMPROVED: "good",
    Status.UNCHANGED: "same",
    Status.UNKNOWN: "unknown",
}
COLORS = {
    "baseline": "#7f7f7f",
    "candidate": "#1f77b4",
    "compute": "#2ca02c",
    "memory alone": "#9467bd",
    "exposed comm": "#d62728",
    "idle": "#c7c7c7",
}
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ddd;padding:4px 8px;font-size:14px}
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
.bad{color:#b00020;font-weight:600}.warn{color:#b26a00}.good{color:#1b7f2a}.same{color:#666}.unknown{color:#888}
.verdict{font-size:20px;padding:8px 12px;border-radius:6px;display:inline-block}
.verdict.pass{background:#e6f4ea}.verdict.fail{background:#fde7e9}.verdict.none{background:#eef}
code{font-size:12px}.fig{height:380px}
"""


def _name_cell(name: str) -> str:
    """A kernel or collective name: shortened, the whole name on hover."""
    name = printable(name)
    return f'<code title="{escape(name)}">{escape(short_name(name, 120))}</code>'


def _table(headers: list[str], rows: list[list[str]], numeric: set[int], raw: bool = False) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=num' if i in numeric else ''}>{c if raw else escape(c)}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure_html(fig, div_id: str, include_js: bool) -> str:
    import plotly.io as pio

    return pio.to_html(
        escape_figure(fig),  # kernel and run names are data, never plotly markup
        full_html=False,
        include_plotlyjs=include_js,
        include_mathjax=False,
        div_id=div_id,
        default_height="380px",
        config={"displaylogo": False, "responsive": True},
    )


def step_time_figure(report: Report):
    """Per-step step time of each run (each point one step)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, values in zip(("baseline", "candidate"), report.step_times_us):
        if values:
            fig.add_trace(
                go.Box(
                    y=list(values),
                    name=name,
                    boxpoints="all",
                    jitter=0.3,
                    pointpos=0,
                    marker_color=COLORS[name],
                )
            )
    for name, info in (("baseline", report.baseline), ("candidate", report.candidate)):
        if info is not None and info.first_step_time_us is not None:  # metrics.md §3
            fig.add_trace(
                go.Scatter(
                    x=[name],
                    y=[info.first_step_time_us],
                    mode="markers",
                    marker={"symbol": "x", "size": 10, "color": COLORS[name]},
                    name=f"{name} first step {info.first_step} (warm-up, not in the box)",
                )
            )
    fig.update_layout(
        title="Step time per step (slowest rank; x: the first step, left out of the medians)",
        yaxis_title="µs",
        template="plotly_white",
        showlegend=False,
        margin={"t": 50, "b": 40},
    )
    return fig


def breakdown_figure(report: Report):
    """Where a step's time goes, mean per rank and step, each run one stacked bar."""
    import plotly.graph_objects as go

    names = ["baseline", "candidate"] if report.baseline is not None else ["run"]
    parts = [dict(b) for b in report.breakdown_us]
    hidden = [p.get("hidden comm (under compute)", 0.0) for p in parts]
    fig = go.Figure()
    for part in ("compute", "exposed comm", "memory alone", "idle"):
        fig.add_trace(
            go.Bar(
                x=names,
                y=[p[part] for p in parts],
                name=part,
                marker_color=COLORS[part],
                customdata=hidden,
                hovertemplate=f"{part}: %{{y:,.1f}} µs<br>(communication hidden under "
                "compute: %{customdata:,.1f} µs)<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title="Step breakdown (mean per rank and step)",
        yaxis_title="µs",
        template="plotly_white",
        margin={"t": 50, "b": 40},
    )
    return fig


def kernel_figure(deltas: tuple[KernelDelta, ...], alone: bool):
    import plotly.graph_objects as go

    labels = [short_name(d.key, 48) for d in deltas][::-1]
    values = [d.candidate_us if alone else d.delta_us for d in deltas][::-1]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            marker_color=COLORS["candidate"],
            hovertext=[d.key for d in deltas][::-1],
        )
    )
    title = "GPU time by kernel" if alone else "Kernels whose time per step grew most"
    fig.update_layout(
        title=title,
        xaxis_title="µs per rank and step" + ("" if alone else " (change)"),
        template="plotly_white",
        margin={"l": 360, "t": 50, "b": 40},
    )
    return fig


def _comparison_rows(report: Report) -> list[list[str]]:
    rows = []
    for c in report.comparisons:
        m = metric_def(c.metric)
        status = f'<span class="{STATUS_CLASS[c.status]}">{escape(c.status.value)}</span>'
        rows.append(
            [
                escape(f"{m.label} ({m.short})"),
                escape(format_value(c.baseline_median, m.unit)),
                escape(format_value(c.candidate_median, m.unit)),
                escape(change_text(c)),
                escape(interval_text(c)),
                escape(c.gates),
                status + f" <small>{escape(c.reason)}</small>",
            ]
        )
    return rows


def render(report: Report) -> str:
    """The whole page."""
    alone = report.baseline is None
    parts = [f"<h1>tpscope report: {escape(report.candidate.title)}</h1>"]
    if alone:
        parts.append(
            '<p class="verdict none">Report of one run: no baseline given, so no verdict.</p>'
        )
        rows = [
            [
                escape(f"{metric_def(s.metric).label} ({metric_def(s.metric).short})"),
                *(
                    escape(format_value(v, metric_def(s.metric).unit))
                    for v in (s.median, s.low, s.high)
                ),
                escape(str(s.n) if s.n else s.missing or "unknown"),
            ]
            for s in report.summaries
        ]
        parts.append(
            _table(["metric", "median", "min", "max", "steps"], rows, {1, 2, 3, 4}, raw=True)
        )
    else:
        v = report.verdict
        parts.append(f'<p class="verdict {"pass" if v.passed else "fail"}">{escape(v.line)}</p>')
        parts.append(
            f"<p>baseline: <code>{escape(report.baseline.run_dir)}</code> ({escape(report.baseline.title)})"
            f"<br>candidate: <code>{escape(report.candidate.run_dir)}</code> "
            f"({escape(report.candidate.title)})</p>"
        )
        if report.config_changes:
            items = "".join(
                f"<li>{escape(k)}: {escape(b)} → {escape(c)}</li>"
                for k, b, c in report.config_changes
            )
            parts.append(f"<p>Changed between the runs (manifest):</p><ul>{items}</ul>")
        parts.append(
            _table(list(COMPARISON_HEADERS), _comparison_rows(report), {1, 2, 3, 4, 5}, raw=True)
        )
        parts.append(
            "<p><small>Medians over steps; the interval is a 95% bootstrap interval of the "
            "difference of medians. A change whose interval holds 0 is inside the noise and never "
            f"fails. Thresholds: <code>--fail-on {escape(report.fail_on.spec)}</code></small></p>"
        )
    if report.headroom:
        parts.append(f"<p>What-if: {escape(report.headroom)}.</p>")
    if report.loss is not None:  # the loss curves (markdown.loss_lines says the same)
        items = [line for line in loss_lines(report)[1:] if line and not line.startswith("###")]
        parts.append(
            "<h2>Loss</h2><ul>"
            + "".join(
                f"<li>{escape(unescape(i.lstrip('- ').replace('**', '')))}</li>" for i in items
            )
            + "</ul>"
        )
    figs = [("step-time", step_time_figure(report)), ("breakdown", breakdown_figure(report))]
    if report.kernels:
        figs.append(("kernels", kernel_figure(report.kernels, alone)))
    for i, (div_id, fig) in enumerate(figs):
        parts.append(f'<div class="fig">{_figure_html(fig, div_id, include_js=(i == 0))}</div>')
    sections = (
        (
            "Kernels "
            + ("by GPU time" if alone else "that regressed most")
            + " (µs per rank and step)",
            kernel_rows(report.kernels, alone),
        ),
        (
            "Collectives "
            + ("by exposed time" if alone else "whose exposed time grew most")
            + " (µs per step)",
            collective_rows(report.collectives, alone),
        ),
    )
    for title, (headers, rows) in sections:
        parts.append(f"<h2>{escape(title)}</h2>")
        # names from traces
        rows = [[_name_cell(r[0]), *(escape(printable(c)) for c in r[1:])] for r in rows]
        parts.append(
            _table(headers, rows, set(range(2, len(headers))), raw=True) if rows else "<p>None.</p>"
        )
    if report.contention:
        headers, rows = contention_rows(report)
        parts.append("<h2>Compute slowed beside communication (metrics.md §8)</h2>")
        rows = [[_name_cell(r[0]), *map(escape, r[1:])] for r in rows]
        parts.append(_table(headers, rows, set(range(1, len(headers))), raw=True))
    if report.gemm is not None:
        parts.append("<h2>GEMMs slowed beside transfers (metrics.md §8)</h2>")
        parts += [f"<p>{escape(line)}</p>" for line in budget_lines(report.gemm)]
        headers, rows = shape_rows(report.gemm)
        parts.append(_table(headers, rows, set(range(1, len(headers)))))
        parts.append(f"<p>{escape(FLOOR_LINE)}</p>")
        headers, rows = part_rows(report.gemm.layers, "layer/op")
        parts.append(_table(headers, rows, set(range(1, len(headers)))))
    if report.flux_overlap_efficiency is not None or report.attained_saving is not None:
        parts.append(
            "<p>Against the baseline (meaningful when it is the unfused run): Flux overlap efficiency "
            f"{number(report.flux_overlap_efficiency, 'ratio')}, attained saving "
            f"{number(report.attained_saving, 'ratio')}.</p>"
        )
    warnings = [*(report.baseline.warnings if report.baseline else ()), *report.candidate.warnings]
    if warnings:
        parts.append(
            "<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in warnings) + "</ul>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>tpscope report: {escape(report.candidate.title)}</title><style>{CSS}</style></head>"
        "<body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
