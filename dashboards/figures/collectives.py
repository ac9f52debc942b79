"""Collectives: the table's columns and the per-rank arrival skew figures."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from tpscope.dashboards.figures.common import base_layout, not_available
from tpscope.dashboards.figures.tables import BYTES, column

# (JSON field, header). Fields the analyzer does not report show as empty cells.
TABLE_COLUMNS = [
    ("step", "step"),
    ("collective", "collective"),
    ("key", "key"),
    ("ranks", "ranks"),
    ("bytes", "bytes"),
    ("skew_us", "skew (µs)"),
    ("wait_us", "wait (µs)"),
    ("transfer_us", "transfer (µs)"),
    ("exposed_us", "exposed (µs)"),
    ("algbw_gbps", "alg bw (GB/s)"),
    ("busbw_gbps", "bus bw (GB/s)"),
]
UNITS = [("_us", "µs"), ("_ns", "ns"), ("_gbps", "GB/s"), ("_bytes", None), ("_ratio", None)]
"""Suffix of a field the analyzer adds -> the unit its header shows (None: no unit)."""
PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D"]


def table_columns(rows: list[dict]) -> list[dict]:
    """The grid's column definitions: the known fields, plus any others the analyzer adds."""
    present = set().union(*(r.keys() for r in rows)) if rows else set()
    cols = [
        (k, h) for k, h in TABLE_COLUMNS if k in present or k in ("step", "collective", "skew_us")
    ]
    known = {k for k, _ in TABLE_COLUMNS}
    cols += [(k, header(k)) for k in sorted(present - known)]
    out = [column(k, h, _specifier(k), natural=k == "key") for k, h in cols]
    for col in out:  # the instances that expose the most first, as analyze's table ranks them
        if col["field"] == "exposed_us":
            col["sort"] = "desc"
    return out


def header(key: str) -> str:
    """A readable header for a field: `queue_us` -> "queue (µs)", `peak_bytes` -> "peak"."""
    for suffix, unit in UNITS:
        if key.endswith(suffix):
            name = key[: -len(suffix)].replace("_", " ")
            return f"{name} ({unit})" if unit else name
    return key.replace("_", " ")


def _specifier(key: str) -> str | None:
    """µs to the ns the trace holds, bandwidth to three significant digits (a gloo link's 0.00233
    GB/s is never a false 0.0), bytes in binary units, counts whole."""
    if key.endswith("_us"):
        return ",.3f"
    if key.endswith("_gbps"):
        return ",.3~r"
    if key == "bytes" or key.endswith("_bytes"):
        return BYTES
    if key == "step" or key.endswith("_ratio"):
        return ",d" if key == "step" else ".1%"
    return None


def skew_figure(rows: list[dict]) -> go.Figure:
    """Arrival skew (µs) of each instance, in order, one colour per collective."""
    rows = [r for r in rows if r.get("skew_us") is not None]
    if not rows:
        return not_available(
            "arrival skew: not available (no matched collectives reported for this run)"
        )
    fig = go.Figure()
    names = sorted({str(r.get("collective")) for r in rows})
    for i, name in enumerate(names):
        sel = [(k, r) for k, r in enumerate(rows) if str(r.get("collective")) == name]
        fig.add_bar(
            x=[k for k, _ in sel],
            y=[r["skew_us"] for _, r in sel],
            name=name,
            marker_color=PALETTE[i % len(PALETTE)],
            customdata=[[r.get("step"), r.get("key")] for _, r in sel],
            hovertemplate="step %{customdata[0]} · %{customdata[1]}<br>skew %{y:,.1f} µs<extra>%{fullData.name}</extra>",
        )
    base_layout(fig, title="Arrival skew per collective instance (µs)", height=320)
    fig.update_layout(xaxis_title="instance (in order)", yaxis_title="µs", barmode="overlay")
    return fig


def arrival_figure(rank, arrival_us) -> go.Figure:
    """Per rank: how long after the first rank it started its kernel of each instance (µs)."""
    rank, arrival_us = np.asarray(rank), np.asarray(arrival_us, dtype=float)
    if len(rank) == 0:
        return not_available(
            "per-rank arrival: not available (no matched collectives in this step)"
        )
    fig = go.Figure()
    for i, r in enumerate(np.unique(rank).tolist()):  # one trace per rank
        fig.add_box(
            y=arrival_us[rank == r],
            name=f"rank {r}",
            boxpoints="all",
            jitter=0.4,
            marker_color=PALETTE[i % len(PALETTE)],
            hovertemplate="%{y:,.1f} µs after the first rank<extra>%{fullData.name}</extra>",
        )
    base_layout(fig, title="Arrival after the first rank, per rank (µs)", height=320)
    fig.update_layout(yaxis_title="µs", showlegend=False)
    return fig
