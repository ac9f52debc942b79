"""The What-if tab: the chosen run's graph replayed (the identity) and under the changes typed in
its box (docs/metrics.md §11), as bars of step time with the critical path's composition."""

from __future__ import annotations

import threading

import plotly.graph_objects as go
from dash import Input, Output, dcc, html
from dash.exceptions import PreventUpdate

from tpscope.dashboards.figures.common import COLORS, base_layout, not_available
from tpscope.errors import UserError

DEFAULT_CHANGES = "hide=all comm=0.5"
PARTS = (
    ("compute_us", "compute"),
    ("comm_us", "comm"),
    ("memory_us", "memory"),
    ("host_us", "host"),
    ("idle_us", "idle"),
)


def tab_children() -> list:
    return [
        html.Div(
            [
                dcc.Input(
                    id="whatif-changes",
                    type="text",
                    debounce=True,
                    value=DEFAULT_CHANGES,
                    placeholder="changes, e.g. fuse=chunked:4 link=50,8 hide=all",
                    className="search",
                    style={"width": "32em"},
                ),
            ],
            className="toolbar",
        ),
        html.Div(id="whatif-note", className="note"),
        dcc.Loading(dcc.Graph(id="whatif-graph", config={"displaylogo": False})),
    ]


def whatif_figure(w) -> go.Figure:
    """One bar per row (measured, each change), stacked by the critical path's composition in µs
    per step; the predicted step time and speedup beside each bar."""
    rows = [
        ("measured", w.measured_step_us, w.measured_path, 1.0)
        + (w.measured_exposed_comm_us, w.tokens_per_s)
    ]
    rows += [
        (p.change, p.predicted_step_us, p.path, p.speedup, p.exposed_comm_us, p.tokens_per_s)
        for p in w.changes
    ]
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return not_available("no step to replay in this run")
    fig = go.Figure()
    names = [r[0] for r in rows]
    for key, label in PARTS:
        ys = [(r[2] or {}).get(key) or 0.0 for r in rows]
        if any(ys):
            fig.add_bar(
                y=names,
                x=ys,
                name=label,
                orientation="h",
                marker_color=COLORS[label],
                hovertemplate=f"%{{y}}<br>{label} on the path: %{{x:,.1f}} µs<extra></extra>",
            )
    fig.add_scatter(
        y=names,
        x=[r[1] for r in rows],
        mode="markers+text",
        text=[_label(r) for r in rows],
        textposition="middle right",
        marker=dict(color=COLORS["critical_path"], symbol="line-ns-open", size=16),
        name="step time",
        customdata=[_hover(r) for r in rows],
        hovertemplate="%{y}<br>step %{x:,.1f} µs%{customdata}<extra></extra>",
    )
    base_layout(
        fig,
        title="Predicted step time (µs, mean without the first step)",
        height=120 + 46 * len(rows),
    )
    fig.update_layout(barmode="stack", xaxis_title="µs per step", yaxis_autorange="reversed")
    # room right of the longest bar for its label ("112,707 µs (1.000x) · 15,061 exposed"), which
    # plotly clips
    top = max(
        [r[1] for r in rows] + [sum((r[2] or {}).get(k) or 0.0 for k, _ in PARTS) for r in rows]
    )
    fig.update_xaxes(range=[0.0, 1.5 * top])
    return fig


def _label(row: tuple) -> str:
    """Beside a row's step time: its speedup and its exposed communication (§4), in µs."""
    _, step, _, speedup, exposed, _ = row
    if not speedup:
        return ""
    text = f"{step:,.0f} µs ({speedup:.3f}x)"
    return text + (f" · {exposed:,.0f} exposed" if exposed is not None else "")


def _hover(row: tuple) -> str:
    """A row's exposed communication and tokens/s, for its hover."""
    _, _, _, _, exposed, tps = row
    text = f"<br>exposed communication {exposed:,.1f} µs" if exposed is not None else ""
    return text + (f"<br>{tps:,.0f} tokens/s" if tps else "")


def note(w) -> str:
    err = w.identity_error
    carried = ", ".join(f"{k} {v:,.0f} µs" for k, v in w.inferred_us_per_step.items() if v)
    return (
        f"Identity: the unchanged graph replays the measured {w.measured_step_us:,.0f} µs step as "
        f"{w.replayed_step_us:,.0f} µs ({err:+.2%})"
        + (f"; inferred edges carry {carried} per step" if carried else "")
        + (f". Pairs found: {len(w.pairs)}." if w.pairs else ". No AG-GEMM / GEMM-RS pair found.")
        + "".join(
            f" Most {kind} time before {top[0][0]} ({top[0][1]:,.0f} µs)."
            for kind, top in w.inferred_top.items()
            if top and top[0][1]
        )
    )


def register(app, store) -> None:
    """The tab's one callback: the run picked and the changes typed -> the figure and a note."""
    from tpscope.metrics.whatif import predict, prepare
    from tpscope.metrics.whatif_changes import ChangeError, parse_change

    prepared: dict = {}
    lock = threading.Lock()

    @app.callback(
        Output("whatif-graph", "figure"),
        Output("whatif-note", "children"),
        Input("run-select", "value"),
        Input("whatif-changes", "value"),
        Input("tabs", "value"),
    )
    def whatif(run_id, text, tab):
        if tab != "whatif" or not run_id:
            raise PreventUpdate
        try:
            changes = [parse_change(t) for t in (text or "").split()]
            loaded = store.load(run_id)
            with lock:
                inp = prepared.get(loaded.key)
                if inp is None:
                    inp = prepared[loaded.key] = prepare(loaded.run)
                    while len(prepared) > 4:
                        prepared.pop(next(iter(prepared)))
            tps = loaded.run.manifest.tokens_per_s if loaded.run.manifest is not None else None
            w = predict(inp, changes, tokens_per_s=tps)
        except (ChangeError, UserError) as exc:
            return not_available(str(exc)), str(exc)
        return whatif_figure(w), note(w)
