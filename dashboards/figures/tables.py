"""The column definitions of the dashboard's tables (dash-ag-grid): one rule for how a number
shows, and the grid options every table shares."""

from __future__ import annotations

from tpscope.metrics.definitions import tooltip

GRID_OPTIONS = {
    "domLayout": "autoHeight",  # every row in the page, as the rest of the dashboard
    "suppressColumnVirtualisation": True,  # every column rendered, off-screen ones too
    "tooltipShowDelay": 300,
    "enableCellTextSelection": True,
    "rowHeight": 32,
    "headerHeight": 36,
    # widths from the cells and headers once rows arrive (they come by callback, after the grid)
    "autoSizeStrategy": {"type": "fitCellContents"},
}
# Functions named here live in assets/dashAgGridFunctions.js (ES5: the grid's parser knows no `??`).
DEFAULT_COLUMN = {
    "sortable": True,
    "resizable": True,
    "minWidth": 90,
    "tooltipValueGetter": {"function": "cellTip(params)"},
}
STYLE = {"fontFamily": "system-ui, sans-serif", "fontSize": "13px"}


BYTES = "bytes"
"""The specifier of a byte count: shown in binary units as tpscope.numbers.size_text writes them
(8 MiB), sorted and filtered as a number."""
NUMBER_FILTER = {
    "filter": "agTextColumnFilter",
    "floatingFilter": True,
    "filterParams": {"textMatcher": {"function": "numberTextMatcher(params)"}, "debounceMs": 200},
}
"""A number column's filter box: `>100`, `>=100`, `<5`, `<=5`, `=100`, `10..20`, or a bare number
(at or above it). AG Grid's own number filter matches a bare number exactly and refuses `>`."""


def column(
    key: str,
    header: str,
    specifier: str | None = None,
    filtered: bool = True,
    natural: bool = False,
) -> dict:
    """One column. With `specifier`, a d3-format spec (`.1%`, `,.3f`, `,d`) or BYTES, it holds
    numbers: right-aligned, filtered and sorted as numbers, an empty cell where the row has no value
    (never a made-up zero). Without, text; `natural`: sorted with the numbers in it read as numbers
    (`/2` before `/10`). `filtered`: a filter box under its header."""
    col: dict = {"field": key, "headerName": header}
    help_text = tooltip(key)
    if help_text:
        col["headerTooltip"] = help_text  # the definition and its metrics.md section
    if specifier == BYTES:
        col.update(type="numericColumn", valueFormatter={"function": "formatBytes(params.value)"})
    elif specifier is not None:
        col.update(
            type="numericColumn",
            valueFormatter={
                "function": f"params.value == null ? '' : d3.format('{specifier}')(params.value)"
            },
        )
    if natural:
        col["comparator"] = {"function": "naturalCompare"}
    if filtered:
        col.update(
            NUMBER_FILTER if specifier else {"filter": "agTextColumnFilter", "floatingFilter": True}
        )
    return col
