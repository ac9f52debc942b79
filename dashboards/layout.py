"""The page: run/baseline/step/rank pickers, a status line, and one tab per view."""

from __future__ import annotations

import dash_ag_grid as dag
from dash import dcc, html

from tpscope.dashboards.figures.tables import DEFAULT_COLUMN, GRID_OPTIONS, STYLE, column
from tpscope.dashboards.results import OVERVIEW_COLUMNS, RATIO_FIELDS

TABS = [
    ("overview", "Overview"),
    ("timeline", "Timeline"),
    ("breakdown", "Breakdown"),
    ("collectives", "Collectives"),
    ("contention", "Contention"),
    ("hta", "HTA"),
    ("whatif", "What-if"),
]
TAB_STYLE = {"padding": "6px 12px", "lineHeight": "22px"}
FIT_MIN_WIDTH = 72  # px: a table fitted to the page's width gives no column less
# No button that offers to upload a chart to a cloud service (Chart Studio): the runs stay here.
GRAPH_CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "showLink": False,
    "sendData": False,
}


def _overview_columns() -> list[dict]:
    cols = []
    for key, name in OVERVIEW_COLUMNS:
        spec = None
        if key in RATIO_FIELDS:
            spec = ".1%"
        elif key in ("step_time_us", "tokens_per_s"):
            spec = ",.1f"
        elif key == "peak_memory_gib":
            spec = ".2f"
        elif key in ("ranks", "steps"):
            spec = ",d"
        # headers wrap (two lines) so that the columns fit the page's width (`_grid`'s fit)
        cols.append(
            {
                **column(key, name, spec, filtered=False),
                "wrapHeaderText": True,
                "minWidth": FIT_MIN_WIDTH,
                "autoHeaderHeight": True,
            }
        )
    return cols


def _grid(
    grid_id: str,
    columns: list[dict],
    page_size: int | None = None,
    row_id: str | None = None,
    fit: dict | None = None,
) -> dag.AgGrid:
    """A sortable table (tpscope.dashboards.figures.tables), `page_size` rows a page if given.
    `fit`: its columns share the page's width (none scrolled off sideways), at least `fit[key]`
    pixels for the columns it names and FIT_MIN_WIDTH for the others."""
    sizing = (
        {
            "autoSizeStrategy": {
                "type": "fitGridWidth",
                "defaultMinWidth": FIT_MIN_WIDTH,
                "columnLimits": [{"colId": k, "minWidth": w} for k, w in fit.items()],
            }
        }
        if fit
        else {}
    )
    options = {
        **GRID_OPTIONS,
        **sizing,
        **(
            {
                "pagination": True,
                "paginationPageSize": page_size,
                "paginationPageSizeSelector": False,
            }
            if page_size
            else {}
        ),
    }
    ids = {"getRowId": f"params.data.{row_id}"} if row_id else {}  # what a click names (a string)
    return dag.AgGrid(
        id=grid_id,
        columnDefs=columns,
        rowData=[],
        dashGridOptions=options,
        defaultColDef=DEFAULT_COLUMN,
        style=STYLE,
        **ids,
    )


def _picker(label: str, component) -> html.Div:
    return html.Div([html.Label(label, className="picker-label"), component], className="picker")


def _graph(graph_id: str, style: dict | None = None, **config) -> dcc.Graph:
    return dcc.Graph(
        id=graph_id, config={**GRAPH_CONFIG, **config}, **({"style": style} if style else {})
    )


def _tab_children(name: str) -> list:
    if name == "whatif":
        from tpscope.dashboards.whatif_view import tab_children

        return tab_children()
    if name == "overview":
        # no spinner: a run still being read shows as "reading…" in its row until it arrives
        return [
            dcc.Interval(id="overview-poll", interval=700, disabled=False),
            html.H4(id="findings-title", className="findings-title"),
            html.Ol(id="overview-findings", className="findings"),
            dcc.Store(id="findings-targets"),
            html.Div(
                [
                    html.Div(_graph("overview-graph"), className="half"),
                    html.Div(_graph("overview-path-graph"), className="half"),
                ],
                className="row",
            ),
            _grid(
                "overview-table",
                _overview_columns(),
                row_id="run",
                fit={"run": 170, "status": 100},
            ),
            html.Div(id="baseline-note", className="note"),
        ]
    if name == "timeline":
        return [
            html.Div(
                [
                    dcc.Input(
                        id="timeline-search",
                        type="search",
                        debounce=True,
                        placeholder="search activities by name",
                        className="search",
                    ),
                    dcc.Checklist(
                        id="timeline-options",
                        options=[{"label": "CPU threads", "value": "launches"}],
                        value=[],
                        inline=True,
                    ),
                    html.Button(
                        "Open in Perfetto (download this step)", id="perfetto-button", n_clicks=0
                    ),
                    dcc.Download(id="perfetto-download"),
                ],
                className="toolbar",
            ),
            html.Div(id="timeline-note", className="note"),
            dcc.Loading(_graph("timeline-graph", scrollZoom=True)),
        ]
    if name == "breakdown":
        return [dcc.Loading([_graph("breakdown-graph"), _graph("critical-path-graph")])]
    if name == "collectives":
        return [
            dcc.Loading(
                [
                    html.Div(id="collectives-note", className="note"),
                    _grid("collectives-table", [], page_size=15, row_id="key"),
                    _graph("skew-graph"),
                    _graph("arrival-graph"),
                ]
            )
        ]
    if name == "contention":
        return [
            dcc.Loading(
                [
                    html.Div(id="contention-note", className="note"),
                    _graph("contention-graph"),
                    _graph("comm-contention-graph"),
                    _graph("tax-graph"),
                ]
            )
        ]
    return [
        html.Div(id="hta-status", className="note"),
        dcc.Loading(
            [
                html.Div(id="hta-note", className="note"),
                # hidden where HTA is not run: the note says why, once
                html.Div(
                    [_graph("hta-temporal-graph"), _graph("hta-idle-graph")], id="hta-figures"
                ),
            ]
        ),
    ]


def build_layout(run_ids: list[str], default_run: str | None) -> html.Div:
    options = [{"label": r, "value": r} for r in run_ids]
    return html.Div(
        [
            dcc.Location(id="url", refresh=False),
            # the view (views.py): asked for by the URL or a click; the zoom and selection shown
            dcc.Store(id="want"),
            dcc.Store(id="zoom"),
            dcc.Store(id="selection"),
            dcc.Store(id="url-sync"),
            html.Div(
                [
                    html.H1("tpscope"),
                    html.Span(
                        "how much of a tensor-parallel step is communication that nothing hides",
                        className="subtitle",
                    ),
                ],
                className="header",
            ),
            html.Div(
                [
                    _picker(
                        "run",
                        dcc.Dropdown(
                            id="run-select", options=options, value=default_run, clearable=False
                        ),
                    ),
                    _picker(
                        "baseline",
                        dcc.Dropdown(
                            id="baseline-select",
                            options=options,
                            value=None,
                            placeholder="none (pick an unfused run)",
                        ),
                    ),
                    _picker(
                        "step",
                        dcc.Dropdown(id="step-select", options=[], value=None, clearable=False),
                    ),
                    _picker(
                        "ranks", dcc.Checklist(id="rank-select", options=[], value=[], inline=True)
                    ),
                ],
                className="controls",
            ),
            html.Div(
                _graph("step-strip", style={"height": "110px"}, displayModeBar=False),
                className="strip",
            ),
            html.Div(id="url-error", className="error"),
            dcc.Loading(
                html.Div(
                    [
                        html.Div(id="run-error", className="error"),
                        html.Div(id="run-warnings", className="warnings"),
                    ]
                ),
                type="dot",
            ),
            dcc.Tabs(
                id="tabs",
                value="overview",
                children=[
                    dcc.Tab(
                        label=label,
                        value=name,
                        children=_tab_children(name),
                        style=TAB_STYLE,
                        selected_style={**TAB_STYLE, "fontWeight": "600"},
                    )
                    for name, label in TABS
                ],
            ),
        ],
        className="page",
    )
