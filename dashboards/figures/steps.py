"""The step strip: each step's time as a bar to click, the slowest in red."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.dashboards.figures.common import COLORS, base_layout, not_available


def strip_figure(summaries: list[dict], chosen: int | None = None) -> go.Figure:
    """One bar per step (`results.step_summaries`): its time (µs), hover its exposed share; the
    slowest red, the chosen one outlined. `customdata[0]` is the step a click opens."""
    if not summaries:
        return not_available("no steps in this run", height=110)
    # the first profiled step, a warm-up the summaries leave out (metrics.md §3), says so and is grey
    colors = [
        COLORS["slowest"] if s["slowest"] else COLORS["filler"] if s["first"] else COLORS["compute"]
        for s in summaries
    ]
    fig = go.Figure(
        go.Bar(
            x=[
                f"step {s['step']}" + (" (warm-up, left out)" if s["first"] else "")
                for s in summaries
            ],
            y=[s["time_us"] for s in summaries],
            name="step time",
            marker=dict(
                color=colors,
                line=dict(
                    color=["#111" if s["step"] == chosen else "rgba(0,0,0,0)" for s in summaries],
                    width=2,
                ),
            ),
            customdata=[
                [
                    s["step"],
                    s["exposed_ratio"] if s["exposed_ratio"] is not None else float("nan"),
                    "slowest"
                    if s["slowest"]
                    else "(the first profiled step: a warm-up, left out of the means)"
                    if s["first"]
                    else "",
                ]
                for s in summaries
            ],
            hovertemplate="step %{customdata[0]} %{customdata[2]}<br>%{y:,.1f} µs (slowest rank)"
            "<br>exposed comm %{customdata[1]:.1%}<extra>click: open on the Timeline</extra>",
        )
    )
    base_layout(fig, height=110)
    fig.update_layout(
        margin=dict(l=60, r=20, t=8, b=24),
        yaxis_title="µs",
        showlegend=False,
        meta={"steps": [s["step"] for s in summaries], "chosen": chosen},
    )
    return fig
