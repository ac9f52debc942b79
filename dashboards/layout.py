"""The page: run/baseline/step/rank pickers, a status line, and one tab per view."""

from __future__ import annotations

from dash import dash_table, dcc, html
from tpscope.dashboards.results import OVERVIEW_COLUMNS, RATIO_FIELDS

TABS = [("overview", "Overview"), ("timeline", "Timeline"), ("breakdown", "Breakdown"),
        ("collectives", "Collectives"), ("contention", "Contention"), ("hta", "HTA")]
TAB_STYLE = {"padding": "6px 12px", "lineHeight": "22px"}
GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
TABLE_STYLE = dict(
    style_table={"overflowX": "auto"},
    style_cell={"fontFamily": "system-ui, sans-serif", "fontSize": "13px", "padding": "4px 8px",
                "textAlign": "right", "maxWidth": "420px", "overflow": "hidden", "textOverflow": "ellipsis"},
    style_header={"fontWeight": "600", "backgroundColor": "#f3f4f6"},
    style_cell_conditional=[{"if": {"column_id": c}, "textAlign": "left"}
                            for c in ("run", "status", "mode", "regime", "collective", "key", "ranks")],
)


def _overview_columns() -> list[dict]:
    cols = []
    for key, name in OVERVIEW_COLUMNS:
        col = {"id": key, "name": name}
        if key in RATIO_FIELDS:
            col.update(type="numeric", format={"specifier": ".1%"})
        elif key in ("step_time_us", "tokens_per_s"):
            col.update(type="numeric", format={"specifier": ",.1f"})
        elif key == "peak_memory_gib":
            col.update(type="numeric", format={"specifier": ".2f"})
        cols.append(col)
    return cols


def _picker(label: str, component) -> html.Div:
    return html.Div([html.Label(label, className="picker-label"), component], className="picker")


def _graph(graph_id: str) -> dcc.Graph:
    return dcc.Graph(id=graph_id, config=GRAPH_CONFIG)


def _tab_children(name: str) -> list:
    if name == "overview":
        return [dcc.Loading([
            dash_table.DataTable(id="overview-table", columns=_overview_columns(), data=[],
                                 sort_action="native", **TABLE_STYLE),
            html.Div(id="baseline-note", className="note"),
            _graph("overview-graph"),
        ], type="default")]
    if name == "timeline":
        return [html.Div(id="timeline-note", className="note"),
                dcc.Loading(dcc.Graph(id="timeline-graph", config={**GRAPH_CONFIG, "scrollZoom": True}))]
    if name == "breakdown":
        return [dcc.Loading([_graph("breakdown-graph"), _graph("critical-path-graph")])]
    if name == "collectives":
        return [dcc.Loading([
            html.Div(id="collectives-note", className="note"),
            dash_table.DataTable(id="collectives-table", columns=[], data=[], sort_action="native",
                                 filter_action="native", page_size=15, **TABLE_STYLE),
            _graph("skew-graph"), _graph("arrival-graph"),
        ])]
    if name == "contention":
        return [dcc.Loading([html.Div(id="contention-note", className="note"),
                             _graph("contention-graph"), _graph("comm-contention-graph"),
                             _graph("tax-graph")])]
    return [dcc.Loading([html.Div(id="hta-note", className="note"), _graph("hta-temporal-graph"),
                         _graph("hta-idle-graph")])]


def build_layout(run_ids: list[str], default_run: str | None) -> html.Div:
    options = [{"label": r, "value": r} for r in run_ids]
    return html.Div([
        dcc.Location(id="url", refresh=False),
        html.Div([
            html.H1("tpscope"),
            html.Span("how much of a tensor-parallel step is communication that nothing hides",
                      className="subtitle"),
        ], className="header"),
        html.Div([
            _picker("run", dcc.Dropdown(id="run-select", options=options, value=default_run, clearable=False)),
            _picker("baseline", dcc.Dropdown(id="baseline-select", options=options, value=None,
                                             placeholder="none (pick an unfused run)")),
            _picker("step", dcc.Dropdown(id="step-select", options=[], value=None, clearable=False)),
            _picker("ranks", dcc.Checklist(id="rank-select", options=[], value=[], inline=True)),
        ], className="controls"),
        html.Div(id="url-error", className="error"),
        dcc.Loading(html.Div([html.Div(id="run-error", className="error"),
                              html.Div(id="run-warnings", className="warnings")]), type="dot"),
        dcc.Tabs(id="tabs", value="overview",
                 children=[dcc.Tab(label=label, value=name, children=_tab_children(name), style=TAB_STYLE,
                                   selected_style={**TAB_STYLE, "fontWeight": "600"}) for name, label in TABS]),
    ], className="page")
