"""Overview: one line per run, and the ratios of every run side by side."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.dashboards.figures.common import COLORS, base_layout, not_available

RATIOS = [
    ("exposed_comm_ratio", "exposed comm", COLORS["exposed_comm"]),
    ("critical_path_exposed_comm_ratio", "critical-path exposed comm", COLORS["host"]),
    ("hidden_of_hideable_ratio", "hidden of hideable comm", COLORS["hidden_comm"]),
    ("contention_slowdown", "contention slowdown", COLORS["memory"]),
]


def ratios_figure(rows: list[dict]) -> go.Figure:
    """Grouped bars of each run's summary ratios (missing values are left out, not zero)."""
    rows = [r for r in rows if r.get("step_time_us") is not None]
    if not rows:
        return not_available("no run could be analyzed")
    fig = go.Figure()
    for key, name, color in RATIOS:
        pts = [(r["run"], r[key]) for r in rows if r.get(key) is not None]
        if pts:
            fig.add_bar(
                x=[p[0] for p in pts],
                y=[p[1] for p in pts],
                name=name,
                marker_color=color,
                hovertemplate=f"%{{x}}<br>{name}: %{{y:.1%}}<extra></extra>",
            )
    base_layout(fig, title="Summary ratios per run", height=340)
    fig.update_layout(barmode="group", yaxis_tickformat=".0%")
    return fig
