"""Breakdown: stacked bars per rank and step, and the critical path's breakdown per step."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.dashboards.figures.common import COLORS, base_layout, not_available

# (field of the JSON, legend name, colour). "compute alone" is compute_us - hidden_comm_us, so the
# stack adds up to the step when memory does not overlap the rest (metrics.md §4).
STACK = [
    ("compute_alone_us", "compute (alone)", COLORS["compute"]),
    ("hidden_comm_us", "hidden comm", COLORS["hidden_comm"]),
    ("exposed_comm_us", "exposed comm", COLORS["exposed_comm"]),
    ("memory_us", "memory", COLORS["memory"]),
    ("idle_us", "idle", COLORS["idle"]),
]
CLASS_OF_SERIES = {
    "compute (alone)": "compute",
    "hidden comm": "comm",
    "exposed comm": "comm",
    "memory": "memory",
}
"""A Breakdown series -> the class of activity a click on it outlines on the Timeline."""
CRITICAL_STACK = [
    ("compute_us", "compute", COLORS["compute"]),
    ("comm_us", "comm", COLORS["comm"]),
    ("memory_us", "memory", COLORS["memory"]),
    ("host_us", "host", COLORS["host"]),
    ("idle_us", "idle", COLORS["idle"]),
]


def bar_label(row: dict) -> str:
    return f"rank {row['rank']} · step {row['step']}"


def stack_values(row: dict) -> dict[str, float]:
    """The five stacked values of one rank-step row of the analyzer JSON."""
    values = {k: row.get(k) or 0.0 for k, _, _ in STACK if k != "compute_alone_us"}
    values["compute_alone_us"] = (row.get("compute_us") or 0.0) - (row.get("hidden_comm_us") or 0.0)
    return values


def breakdown_figure(rows: list[dict]) -> go.Figure:
    """Stacked bars (µs) per rank and step; hover shows the JSON's fields; a marker at step time."""
    if not rows:
        return not_available("no steps on the chosen ranks")
    labels = [bar_label(r) for r in rows]
    values = [stack_values(r) for r in rows]
    fig = go.Figure()
    for key, name, color in STACK:
        fig.add_bar(
            x=labels,
            y=[v[key] for v in values],
            name=name,
            marker_color=color,
            hovertemplate=f"%{{x}}<br>{name}: %{{y:,.1f}} µs<extra></extra>",
        )
    fig.add_scatter(
        x=labels,
        y=[r["step_time_us"] for r in rows],
        mode="markers",
        name="step time",
        marker=dict(symbol="line-ew-open", size=28, color="#222", line=dict(width=2)),
        customdata=[[r.get("exposed_comm_ratio"), r.get("hidden_of_hideable_ratio")] for r in rows],
        hovertemplate="%{x}<br>step time %{y:,.1f} µs<br>exposed comm %{customdata[0]:.1%}"
        "<br>hidden of hideable comm %{customdata[1]:.1%}<extra></extra>",
    )
    base_layout(fig, title="Per rank and step (µs)", height=420)
    fig.update_layout(barmode="stack", yaxis_title="µs")
    return fig


def critical_path_figure(rows: list[dict]) -> go.Figure:
    """Stacked bars per step of the critical path's compute, comm, memory, host and idle (µs)."""
    if not rows:
        return not_available(
            "critical path: not available for this run (the analyzer did not report one)"
        )
    labels = [f"step {r['step']}" for r in rows]
    fig = go.Figure()
    for key, name, color in CRITICAL_STACK:
        fig.add_bar(
            x=labels,
            y=[r.get(key) or 0.0 for r in rows],
            name=name,
            marker_color=color,
            hovertemplate=f"%{{x}}<br>{name}: %{{y:,.1f}} µs<extra></extra>",
        )
    fig.add_scatter(
        x=labels,
        y=[r.get("length_us") for r in rows],
        mode="markers",
        name="path length",
        marker=dict(symbol="line-ew-open", size=28, color="#222", line=dict(width=2)),
        customdata=[
            [r.get("exposed_comm_ratio"), ", ".join(map(str, r.get("ranks") or []))] for r in rows
        ],
        hovertemplate="%{x}<br>critical path %{y:,.1f} µs<br>exposed comm on it %{customdata[0]:.1%}"
        "<br>ranks visited: %{customdata[1]}<extra></extra>",
    )
    base_layout(fig, title="Critical path across ranks, per step (µs)", height=380)
    fig.update_layout(barmode="stack", yaxis_title="µs")
    return fig
