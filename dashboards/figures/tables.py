"""The column definitions of the dashboard's tables (dash-ag-grid): one rule for how a number
shows, and the grid options every table shares."""

from __future__ import annotations

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
DEFAULT_COLUMN = {"sortable": True, "resizable": True, "minWidth": 90, "tooltipValueGetter":
                  {"function": "params.valueFormatted ?? params.value"}}
STYLE = {"fontFamily": "system-ui, sans-serif", "fontSize": "13px"}


def column(key: str, header: str, specifier: str | None = None, filtered: bool = True) -> dict:
    """One column. With `specifier`, a d3-format spec (`.1%`, `,.3f`, `,d`), it holds numbers:
    right-aligned, filtered and sorted as numbers, an empty cell where the row has no value
    (never a made-up zero). Without, text. `filtered`: a filter box under its header."""
    col: dict = {"field": key, "headerName": header}
    if specifier is not None:
        col.update(type="numericColumn", valueFormatter={
            "function": f"params.value == null ? '' : d3.format('{specifier}')(params.value)"})
    if filtered:
        col.update(filter="agNumberColumnFilter" if specifier else "agTextColumnFilter", floatingFilter=True)
    return col
