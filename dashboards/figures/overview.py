"""Overview: where each rank's step goes, as one stacked bar per rank and step."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.dashboards.figures.breakdown import breakdown_figure


def stack_figure(rows: list[dict]) -> go.Figure:
    """Per rank and step, the step split into compute alone, hidden communication, exposed
    communication, memory and idle (metrics.md §4), with the step time as a tick."""
    fig = breakdown_figure(rows)
    if rows:
        fig.update_layout(
            title="Where each step goes, per rank (µs, §4)", legend=dict(orientation="h", y=-0.3)
        )
    return fig


def path_figure(fig: go.Figure) -> go.Figure:
    """The critical path's composition per step (breakdown.critical_path_figure), its legend
    below the bars so that it leaves the title free."""
    fig.update_layout(title="The critical path across ranks, per step (µs, §7)")
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return fig
