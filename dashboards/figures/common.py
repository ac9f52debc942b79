"""Colours, units and the "not available" figure shared by every view."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.numbers import number

COLORS = {
    "compute": "#4C78A8",
    "comm": "#E45756",
    "exposed_comm": "#E45756",
    "hidden_comm": "#F58518",
    "comm_wait": "#F9C0BF",
    "memory": "#54A24B",
    "filler": "#BAB0AC",
    "idle": "#D9D9D9",
    "host": "#B279A2",
    "label": "#9D9D9D",
    "critical_path": "#111111",
    "link": "#7F7F7F",
    "selected": "#FFC400",
    "slowest": "#E45756",
}
FONT = dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12)


def base_layout(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None,
        template="plotly_white",
        font=FONT,
        margin=dict(l=60, r=20, t=50 if title else 20, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.01, xanchor="right", x=1),
        height=height,
    )
    return fig


def not_available(message: str, height: int = 260) -> go.Figure:
    """An empty figure that says what is missing and why, instead of made-up zeros."""
    fig = go.Figure()
    fig.add_annotation(
        text=message,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font=dict(size=14, color="#555"),
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    base_layout(fig, height=height)
    fig.update_layout(meta={"not_available": message})
    return fig


def fmt_ratio(value: float | None) -> str:
    return number(value, "ratio", missing="not available")
