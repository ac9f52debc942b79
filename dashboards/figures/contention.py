"""Contention: GEMMs by shape (else kernels by signature) isolated versus overlapped (metrics.md §8)."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.dashboards.figures.common import COLORS, base_layout, not_available
from tpscope.metrics.contention_rank import FLOOR_TEXT, GEMM_FLOOR_TEXT, distinct_labels
from tpscope.numbers import size_text

MAX_SIGNATURES = 30
GEMM_CUSTOMDATA = ("rule", "source", "slowdown", "n_overlapped", "tax_us_per_step", "shape")
"""Per bar of the GEMM figure (every bar of a shape holds it); a signature bar holds at most five."""
MIN_AXIS_US = 10.0
"""The duration axes span at least this much from 0, so a kernel of a few µs shows as the short
bar it is instead of filling the axis."""


def _duration_axis(fig: go.Figure, values: list[float | None]) -> None:
    top = max([v for v in values if v is not None] or [0.0])
    fig.update_xaxes(range=[0.0, max(MIN_AXIS_US, 1.08 * top)], rangemode="tozero")


def short_signature(sig: str, limit: int = 60) -> str:
    return sig if len(sig) <= limit else sig[: limit - 1] + "…"


def contention_figure(rows: list[dict], cpu_run: bool = False) -> go.Figure:
    """Grouped horizontal bars: median isolated and overlapped duration (µs) per signature; a CPU
    run's compute is its CPU ops' self time (metrics.md §1), so its signatures are CPU ops'."""
    what = "CPU op" if cpu_run else "kernel"
    if not rows:
        return not_available(
            f"contention per {what} signature: not available for this run (none above the floor: "
            f"{FLOOR_TEXT.removeprefix('shown: ')})"
        )
    rows = sorted(rows, key=lambda r: -(r.get("tax_us_per_step") or 0.0))[:MAX_SIGNATURES]
    # labels that tell the rows apart, the most tax first
    labels = distinct_labels([r["signature"].split("|")[0] for r in rows], 48)
    names = [
        f"#{i + 1} {n}"
        + (f" · {r['tax_us_per_step']:,.0f} µs/step" if r.get("tax_us_per_step") else "")
        for i, (n, r) in enumerate(zip(labels, rows))
    ]
    fig = go.Figure()
    fig.add_bar(
        y=names,
        x=[r["isolated_median_us"] for r in rows],
        orientation="h",
        name="isolated (median)",
        marker_color=COLORS["compute"],
        customdata=[r["signature"] for r in rows],
        hovertemplate="%{customdata}<br>isolated %{x:,.2f} µs<extra></extra>",
    )
    fig.add_bar(
        y=names,
        x=[r["overlapped_median_us"] for r in rows],
        orientation="h",
        name="overlapped (median)",
        marker_color=COLORS["hidden_comm"],
        customdata=[
            [
                r["signature"],
                r.get("slowdown"),
                r.get("n_isolated"),
                r.get("n_overlapped"),
                r.get("baseline"),
            ]
            for r in rows
        ],
        hovertemplate="%{customdata[0]}<br>overlapped %{x:,.2f} µs<br>slowdown %{customdata[1]:.1%}"
        "<br>%{customdata[2]} isolated, %{customdata[3]} overlapped; baseline: "
        "%{customdata[4]}<extra></extra>",
    )
    base_layout(
        fig,
        title=f"{what.capitalize()} duration isolated vs overlapped with communication (µs), most "
        "tax per step first",
        height=140 + 40 * len(rows),
    )
    fig.update_layout(barmode="group", xaxis_title="µs", margin=dict(l=380))
    fig.update_yaxes(autorange="reversed")
    _duration_axis(
        fig, [r["isolated_median_us"] for r in rows] + [r["overlapped_median_us"] for r in rows]
    )
    return fig


def gemm_contention_figure(rows: list[dict]) -> go.Figure:
    """Grouped horizontal bars per GEMM shape: alone on every SM (its baseline), alone on as many SMs
    as beside the transfer (when known) and beside the transfer, medians in µs (metrics.md §8)."""
    rows = rows[:MAX_SIGNATURES]
    names = [
        f"#{i + 1} {r['shape']}"
        + (f" · {r['tax_us_per_step']:,.0f} µs/step" if r.get("tax_us_per_step") else "")
        for i, r in enumerate(rows)
    ]
    info = [
        [
            r["rule"],
            r.get("source"),
            r.get("slowdown"),
            r["n_overlapped"],
            r["tax_us_per_step"],
            r["shape"],
        ]
        for r in rows
    ]
    fig = go.Figure()
    fig.add_bar(
        y=names,
        x=[r["baseline_us"] for r in rows],
        orientation="h",
        name="isolated (median)",
        marker_color=COLORS["compute"],
        customdata=info,
        hovertemplate="%{y}<br>alone %{x:,.1f} µs<br>baseline: %{customdata[0]} (%{customdata[1]})"
        "<extra></extra>",
    )
    fig.add_bar(
        y=names,
        x=[r.get("same_sm_us") for r in rows],
        orientation="h",
        name="isolated, same SMs",
        marker_color=COLORS["memory"],
        customdata=info,
        hovertemplate="%{y}<br>alone on the same SMs %{x:,.1f} µs<extra></extra>",
    )
    fig.add_bar(
        y=names,
        x=[r["overlapped_median_us"] for r in rows],
        orientation="h",
        name="overlapped (median)",
        marker_color=COLORS["hidden_comm"],
        customdata=info,
        hovertemplate="%{y}<br>beside a transfer %{x:,.1f} µs<br>slowdown %{customdata[2]:.1%}"
        "<br>%{customdata[3]} beside a transfer, tax %{customdata[4]:,.1f} µs per rank and step"
        "<extra></extra>",
    )
    base_layout(
        fig,
        title="GEMM duration by shape: alone vs beside a transfer (µs), most tax per step first"
        f"<br><sup>{GEMM_FLOOR_TEXT}</sup>",
        height=160 + 48 * len(rows),
    )
    fig.update_layout(barmode="group", xaxis_title="µs", margin=dict(l=330))
    fig.update_yaxes(autorange="reversed")
    return fig


def clicked_selection(customdata) -> dict:
    """The Timeline selection a click on a bar of either figure names: a GEMM bar's customdata is
    GEMM_CUSTOMDATA (every GEMM of its shape), a signature bar's its signature or a list that starts
    with it (every kernel of that signature's name)."""
    if isinstance(customdata, list) and len(customdata) == len(GEMM_CUSTOMDATA):
        return {"kind": "gemm", "key": str(customdata[GEMM_CUSTOMDATA.index("shape")])}
    signature = customdata[0] if isinstance(customdata, list) else customdata
    return {"kind": "kernel", "key": str(signature)}


def comm_contention_figure(rows: list[dict]) -> go.Figure:
    """Per collective shape: median transfer time isolated versus beside compute (µs)."""
    if not rows:
        return not_available(
            "communication side: not available (no collective shape seen both isolated "
            "and beside compute)"
        )
    names = [
        f"{r['collective']} · {size_text(r['bytes'])}" if r.get("bytes") else str(r["collective"])
        for r in rows
    ]
    fig = go.Figure()
    fig.add_bar(
        y=names,
        x=[r["isolated_transfer_us"] for r in rows],
        orientation="h",
        name="isolated (median)",
        marker_color=COLORS["comm"],
        customdata=[r.get("isolated_busbw_gbps") for r in rows],
        hovertemplate="%{y}<br>isolated %{x:,.2f} µs · busbw %{customdata:,.1f} GB/s<extra></extra>",
    )
    fig.add_bar(
        y=names,
        x=[r["overlapped_transfer_us"] for r in rows],
        orientation="h",
        name="beside compute (median)",
        marker_color=COLORS["hidden_comm"],
        customdata=[[r.get("overlapped_busbw_gbps"), r.get("slowdown")] for r in rows],
        hovertemplate="%{y}<br>beside compute %{x:,.2f} µs · busbw %{customdata[0]:,.1f} GB/s"
        "<br>slowdown %{customdata[1]:.1%}<extra></extra>",
    )
    base_layout(
        fig,
        title="Collective transfer time isolated vs beside compute (µs)",
        height=140 + 50 * len(rows),
    )
    fig.update_layout(barmode="group", xaxis_title="µs", margin=dict(l=380))
    fig.update_yaxes(autorange="reversed")
    _duration_axis(
        fig, [r["isolated_transfer_us"] for r in rows] + [r["overlapped_transfer_us"] for r in rows]
    )
    return fig


def tax_figure(step_rows: list[dict]) -> go.Figure:
    """contention_tax_us per rank and step, when the analyzer computed it."""
    rows = [r for r in step_rows if r.get("contention_tax_us") is not None]
    if not rows:
        return not_available("contention tax per step: not available for this run")
    fig = go.Figure()
    fig.add_bar(
        x=[f"rank {r['rank']} · step {r['step']}" for r in rows],
        y=[r["contention_tax_us"] for r in rows],
        marker_color=COLORS["exposed_comm"],
        name="contention tax",
        customdata=[r.get("contention_slowdown") for r in rows],
        hovertemplate="%{x}<br>tax %{y:,.1f} µs<br>slowdown %{customdata:.1%}<extra></extra>",
    )
    base_layout(fig, title="Contention tax per rank and step (µs)", height=320)
    fig.update_layout(yaxis_title="µs")
    return fig
