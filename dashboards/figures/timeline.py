"""The Timeline: one lane per rank and stream, one trace per class (numpy, no loop over events).

Each class is a single Scatter of horizontal line segments separated by NaN, so a step with
tens of thousands of activities is a handful of SVG paths, not one element per kernel.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from tpscope.dashboards.figures.common import COLORS, base_layout, not_available
from tpscope.dashboards.timeline_data import Segments, TimelineData

LANE_PX = 28
BAR_PX = 16
MAX_LABEL_TEXTS = 300
HOVER = "%{customdata[0]}<br>start %{customdata[1]:,.2f} µs · dur %{customdata[2]:,.2f} µs<extra>%{fullData.name}</extra>"


def segment_arrays(seg: Segments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y and customdata of NaN-separated segments: start, middle, end, gap per interval."""
    n = len(seg)
    x = np.full(4 * n, np.nan)
    x[0::4], x[1::4], x[2::4] = seg.start_us, (seg.start_us + seg.end_us) / 2.0, seg.end_us
    y = np.full(4 * n, np.nan)
    for k in range(3):
        y[k::4] = seg.y
    custom = np.empty((4 * n, 3), dtype=object)
    dur = seg.end_us - seg.start_us
    for k in range(3):
        custom[k::4, 0] = seg.text
        custom[k::4, 1] = seg.start_us
        custom[k::4, 2] = dur
    return x, y, custom


def _segments_trace(seg: Segments, name: str, color: str, width: int, hover: bool = True,
                    legendgroup: str | None = None) -> go.Scatter:
    x, y, custom = segment_arrays(seg)
    return go.Scatter(
        x=x, y=y, customdata=custom if hover else None, mode="lines", name=name,
        line=dict(color=color, width=width), connectgaps=False,
        hovertemplate=HOVER if hover else None, hoverinfo=None if hover else "skip",
        legendgroup=legendgroup or name,
    )


def link_arrays(points: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Polylines (x, y per instance) joined into one NaN-separated pair of arrays."""
    if not points:
        return np.zeros(0), np.zeros(0)
    xs = [np.append(np.asarray(x, dtype=float), np.nan) for x, _ in points]
    ys = [np.append(np.asarray(y, dtype=float), np.nan) for _, y in points]
    return np.concatenate(xs), np.concatenate(ys)


def timeline_figure(data: TimelineData | None, waits: Segments | None = None,
                    links: list[tuple[np.ndarray, np.ndarray]] | None = None,
                    critical_path: Segments | None = None, title: str | None = None) -> go.Figure:
    """Activities coloured by class, labels, waits, collective links and the critical path."""
    if data is None or not data.lanes:
        return not_available("no GPU activity in this step on the chosen ranks")
    traces = []
    for cls, seg in data.activities.items():
        if len(seg):
            traces.append(_segments_trace(seg, cls, COLORS[cls], BAR_PX))
    if waits is not None and len(waits):
        traces.append(_segments_trace(waits, "comm wait", COLORS["comm_wait"], BAR_PX))
    if len(data.labels):
        traces.append(_segments_trace(data.labels, "labels", COLORS["label"], 6))
        traces.append(_label_text_trace(data.labels))
    if links:
        x, y = link_arrays(links)
        traces.append(go.Scatter(x=x, y=y, mode="lines", name="collective links", hoverinfo="skip",
                                 line=dict(color=COLORS["link"], width=1, dash="dot")))
    if critical_path is not None and len(critical_path):
        traces.append(_segments_trace(critical_path, "critical path", COLORS["critical_path"], 4))
    fig = go.Figure(traces)
    n = len(data.lanes)
    base_layout(fig, title=title, height=90 + LANE_PX * n)
    fig.update_yaxes(tickvals=[lane.y for lane in data.lanes], ticktext=[lane.label for lane in data.lanes],
                     range=[n - 0.5, -0.5], fixedrange=True, showgrid=False, zeroline=False)
    fig.update_xaxes(title_text="µs since the step's first activity (all chosen ranks)", range=list(data.view_us),
                     showgrid=True, zeroline=False)
    fig.update_layout(hovermode="closest", dragmode="zoom", margin=dict(l=150),
                      meta={"total": data.total, "drawn": data.drawn, "step": data.step})
    return fig


def _label_text_trace(labels: Segments) -> go.Scatter:
    """The names of the longest labels, written at their middle."""
    keep = np.argsort(-(labels.end_us - labels.start_us))[:MAX_LABEL_TEXTS]
    return go.Scatter(
        x=(labels.start_us[keep] + labels.end_us[keep]) / 2.0, y=labels.y[keep] - 0.32,
        text=labels.text[keep], mode="text", textfont=dict(size=10, color="#333"),
        hoverinfo="skip", showlegend=False, name="label names",
    )


def timeline_note(data: TimelineData | None) -> str:
    """What is drawn, and what was left out when the cap applies."""
    if data is None:
        return "No activity for this step on the chosen ranks."
    if data.capped:
        return (f"Step {data.step}: showing the {data.drawn:,} longest of {data.total:,} activities in view "
                "(zoom in to see the rest).")
    return f"Step {data.step}: {data.total:,} activities on {len(data.lanes)} lanes."
