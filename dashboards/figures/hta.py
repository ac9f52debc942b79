"""HTA's temporal and idle-time breakdowns, drawn from the frames HTA returns."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.dashboards.figures.common import COLORS, base_layout, not_available

TEMPORAL = [
    ("compute_time(us)", "compute", COLORS["compute"]),
    ("non_compute_time(us)", "non-compute (comm, memory)", COLORS["comm"]),
    ("idle_time(us)", "idle", COLORS["idle"]),
]
IDLE_COLORS = {
    "host_wait": COLORS["host"],
    "kernel_wait": COLORS["hidden_comm"],
    "other": COLORS["idle"],
}


def temporal_figure(frame) -> go.Figure:
    """Stacked bars per rank of HTA's compute, non-compute and idle time (µs, whole trace)."""
    if frame is None or len(frame) == 0:
        return not_available("HTA temporal breakdown: not available")
    ranks = [f"rank {int(r)}" for r in frame["rank"].tolist()]
    fig = go.Figure()
    for col, name, color in TEMPORAL:
        if col in frame.columns:
            fig.add_bar(
                x=ranks,
                y=frame[col].tolist(),
                name=name,
                marker_color=color,
                hovertemplate=f"%{{x}}<br>{name}: %{{y:,.0f}} µs<extra>HTA</extra>",
            )
    base_layout(fig, title="HTA temporal breakdown (whole trace, µs)", height=340)
    fig.update_layout(barmode="stack", yaxis_title="µs")
    return fig


def idle_figure(frame) -> go.Figure:
    """Stacked bars per rank and stream of HTA's idle time by category (µs)."""
    if frame is None or len(frame) == 0:
        return not_available("HTA idle-time breakdown: not available")
    lanes = [
        f"rank {int(r)} · stream {int(s)}"
        for r, s in zip(frame["rank"].tolist(), frame["stream"].tolist())
    ]
    fig = go.Figure()
    cats = list(dict.fromkeys(frame["idle_category"].tolist()))
    for cat in cats:
        m = (frame["idle_category"] == cat).to_numpy()
        fig.add_bar(
            x=[lane for lane, keep in zip(lanes, m) if keep],
            y=frame["idle_time"][m].tolist(),
            name=cat,
            marker_color=IDLE_COLORS.get(cat, "#888"),
            hovertemplate=f"%{{x}}<br>{cat}: %{{y:,.0f}} µs<extra>HTA</extra>",
        )
    base_layout(fig, title="HTA idle time by cause, per stream (µs)", height=340)
    fig.update_layout(barmode="stack", yaxis_title="µs")
    return fig
