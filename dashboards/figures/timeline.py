"""The Timeline: one lane per rank and stream, one trace per class (numpy, no loop over events).

Each class is a single Scatter of horizontal line segments separated by NaN, so a step with
tens of thousands of activities is a handful of paths, not one element per kernel; above
WEBGL_FROM segments the classes are drawn with WebGL (Scattergl), which redraws them without
freezing the page.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from tpscope.dashboards.figures.common import COLORS, base_layout, not_available
from tpscope.dashboards.timeline_data import Segments, TimelineData
from tpscope.numbers import number

LANE_PX = 28
BAR_PX = 16
MAX_LABEL_TEXTS = 300
PLOT_PX = 1100  # the plot area's usual width: labels narrower on screen than their text get none
CHAR_PX = 6.2  # width of one character at the label font size
HOVER = "%{text}<br>start %{customdata[0]:,.2f} µs · dur %{customdata[1]:,.2f} µs<extra>%{fullData.name}</extra>"
EXPOSED = "exposed comm"  # the trace of the comm parts no compute hides; "comm" is the rest
WEBGL_FROM = 5_000  # segments in the view from which the classes are drawn with WebGL


def segment_arrays(seg: Segments) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """x, y, customdata (start, duration) and names of NaN-separated segments: start, middle, end, gap.

    Numbers stay float arrays (sent as binary); only the names travel as text.
    """
    n = len(seg)
    x = np.full(4 * n, np.nan)
    x[0::4], x[1::4], x[2::4] = seg.start_us, (seg.start_us + seg.end_us) / 2.0, seg.end_us
    y = np.full(4 * n, np.nan)
    custom = np.full((4 * n, 2), np.nan)
    text = np.full(4 * n, "", dtype=object)
    names = seg.text
    if seg.info is not None and len(seg):
        # element-wise on objects
        names = np.where(seg.info == "", seg.text, seg.text + "<br>" + seg.info)
    for k in range(3):  # the three points of every segment, each a strided slice
        y[k::4] = seg.y
        custom[k::4, 0] = seg.start_us
        custom[k::4, 1] = seg.end_us - seg.start_us
        text[k::4] = names
    return x, y, custom, text.tolist()


def _segments_trace(
    seg: Segments,
    name: str,
    color: str,
    width: int,
    hover: bool = True,
    legendgroup: str | None = None,
    webgl: bool = False,
) -> go.Scatter:
    x, y, custom, text = segment_arrays(seg)
    return (go.Scattergl if webgl else go.Scatter)(
        x=x,
        y=y,
        customdata=custom if hover else None,
        text=text if hover else None,
        mode="lines",
        name=name,
        line=dict(color=color, width=width),
        connectgaps=False,
        hovertemplate=HOVER if hover else None,
        hoverinfo=None if hover else "skip",
        legendgroup=legendgroup or name,
    )


def timeline_figure(
    data: TimelineData | None,
    waits: Segments | None = None,
    links: tuple[np.ndarray, np.ndarray] | None = None,
    path: tuple[np.ndarray, np.ndarray, np.ndarray, list] | None = None,
    title: str | None = None,
    selected: Segments | None = None,
    selection: str | None = None,
) -> go.Figure:
    """Activities coloured by class, labels, waits, collective links and the critical path; the
    activities a click selected (`selection` names it) outlined beneath them."""
    if data is None or not data.lanes:
        return not_available("no GPU activity in this step on the chosen ranks")
    traces = []
    if selected is not None and len(selected):
        traces.append(_segments_trace(selected, "selected", COLORS["selected"], BAR_PX + 10))
    webgl = data.drawn >= WEBGL_FROM
    for cls, seg in data.activities.items():
        if len(seg):
            # communication drawn as hidden; its exposed parts (metrics.md §4) drawn over it
            color = COLORS["hidden_comm"] if cls == "comm" else COLORS[cls]
            traces.append(_segments_trace(seg, cls, color, BAR_PX, webgl=webgl))
    if data.exposed is not None and len(data.exposed):
        traces.append(
            _segments_trace(data.exposed, EXPOSED, COLORS["exposed_comm"], BAR_PX, webgl=webgl)
        )
    if data.launches is not None and len(data.launches):
        traces.append(
            _segments_trace(
                data.launches,
                "CPU ops",
                COLORS["host"],
                BAR_PX,
                webgl=len(data.launches) >= WEBGL_FROM,
            )
        )
    if data.arrows is not None and len(data.arrows[0]):
        traces.append(
            go.Scatter(
                x=data.arrows[0],
                y=data.arrows[1],
                mode="lines",
                name="launch arrows",
                hoverinfo="skip",
                line=dict(color=COLORS["host"], width=1),
            )
        )
    if waits is not None and len(waits):
        traces.append(_segments_trace(waits, "comm wait", COLORS["comm_wait"], BAR_PX))
    if len(data.labels):
        traces.append(_segments_trace(data.labels, "labels", COLORS["label"], 6))
        traces.append(_label_text_trace(data.labels, data.view_us))
    if links is not None and len(links[0]):
        traces.append(
            go.Scatter(
                x=links[0],
                y=links[1],
                mode="lines",
                name="collective links",
                hoverinfo="skip",
                line=dict(color=COLORS["link"], width=1.5, dash="dot"),
            )
        )
    if path is not None and len(path[0]):
        traces.append(
            go.Scatter(
                x=path[0],
                y=path[1],
                customdata=path[2],
                text=path[3],
                mode="lines",
                name="critical path",
                line=dict(color=COLORS["critical_path"], width=2.5),
                hovertemplate="critical path: %{text}<br>start %{customdata[0]:,.2f} µs"
                " · %{customdata[1]:,.2f} µs<extra></extra>",
            )
        )
    fig = go.Figure(traces)
    n = len(data.lanes)
    base_layout(fig, title=title, height=90 + LANE_PX * n)
    fig.update_yaxes(
        tickvals=[lane.y for lane in data.lanes],
        ticktext=[lane.label for lane in data.lanes],
        range=[n - 0.5, -0.9],
        fixedrange=True,
        showgrid=False,
        zeroline=False,
    )
    fig.update_xaxes(
        title_text="µs since the step's first activity (all chosen ranks)",
        range=list(data.view_us),
        showgrid=True,
        zeroline=False,
    )
    fig.update_layout(
        hovermode="closest",
        dragmode="zoom",
        margin=dict(l=150, t=40),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0),
        meta={
            "total": data.total,
            "drawn": data.drawn,
            "step": data.step,
            "selection": selection,
            "selected": len(selected) if selected is not None else 0,
        },
    )
    return fig


def _label_text_trace(labels: Segments, view_us: tuple[float, float]) -> go.Scatter:
    """The names of the labels wide enough on screen to hold them, written at their middle."""
    display = labels.text.astype(str)
    chunk = np.char.find(display, "/chunk") >= 0
    # chunk i: "#i"
    display = np.where(
        chunk, np.char.add("#", np.char.rpartition(display, "/chunk")[:, 2]), display
    )
    px_per_us = PLOT_PX / max(view_us[1] - view_us[0], 1e-9)
    lo = np.maximum(labels.start_us, view_us[0])
    hi = np.minimum(labels.end_us, view_us[1])
    visible_us = hi - lo
    half_us = (np.char.str_len(display) * CHAR_PX + 6) / 2.0 / px_per_us
    fits = visible_us >= 2.0 * half_us
    keep = np.flatnonzero(fits)
    keep = keep[np.argsort(-visible_us[keep], kind="stable")]
    mid = (lo + hi) / 2.0
    keep = _apart(keep, labels.y, mid - half_us, mid + half_us)
    mid = mid[keep]
    return go.Scatter(
        x=mid,
        y=labels.y[keep] - 0.3,
        text=display[keep].tolist(),
        mode="text",
        textfont=dict(size=10, color="#333"),
        hoverinfo="skip",
        showlegend=False,
        name="label names",
    )


def _apart(order: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Of the labels in `order` (widest first), those whose text [lo, hi) overlaps no text kept
    before it on the same row (a chunk's range inside or beside another's on a CPU run's row):
    at most MAX_LABEL_TEXTS, so the loop is bounded by what a screen can hold."""
    kept: list[int] = []
    spans: dict[float, list[tuple[float, float]]] = {}
    for i in order[: 8 * MAX_LABEL_TEXTS].tolist():
        row = spans.setdefault(float(y[i]), [])
        if all(hi[i] <= a or lo[i] >= b for a, b in row):
            row.append((float(lo[i]), float(hi[i])))
            kept.append(i)
            if len(kept) == MAX_LABEL_TEXTS:
                break
    return np.array(kept, dtype=np.int64)


def timeline_note(data: TimelineData | None) -> str:
    """What is drawn, and what was left out when the cap applies."""
    if data is None:
        return "No activity for this step on the chosen ranks."
    cpu = ""
    if data.thread_of:
        cpu = f" CPU threads: {data.cpu_total:,} outermost CPU ops"
        if data.cpu_aggregated:
            cpu += f", the {data.cpu_aggregated:,} narrower than a pixel merged into busy spans"
        cpu += "."
    if data.capped:
        return (
            f"Step {data.step}: {data.total:,} activities in view; the {data.aggregated:,} narrower than a "
            "pixel are merged into busy spans per lane (hover says how many; zoom in to see each)."
            + cpu
        )
    where = ""
    if data.view_us != data.step_us:
        lo, hi, step = (
            number(v, "count") for v in (data.view_us[0], data.view_us[1], data.step_us[1])
        )
        where = f" in {lo}–{hi} µs of the step's {step} µs"
    return f"Step {data.step}: {data.total:,} activities on {len(data.lanes)} lanes{where}." + cpu
