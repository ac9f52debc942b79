"""Build the Dash app over a list of run folders (read when a view asks, or ahead of it)."""

from __future__ import annotations

from pathlib import Path

import dash_ag_grid
from dash import Dash

from tpscope.cache import DiskCache
from tpscope.dashboards.callbacks import register_callbacks
from tpscope.dashboards.layout import build_layout
from tpscope.dashboards.store import RunStore
from tpscope.dashboards.whatif_view import register as register_whatif

ASSETS = Path(__file__).resolve().parent / "assets"
AG_GRID_BUNDLE = "dash_ag_grid.min.js"


def _ag_grid_on_demand() -> None:
    """AG Grid's bundle off the page's script list, still served: assets/agGridOnDemand.js
    fetches it once the charts on view have drawn (Dash reads each component library's
    `_js_dist` when it writes the page)."""
    dash_ag_grid._js_dist = [
        {**r, "dynamic": True} if r.get("relative_package_path") == AG_GRID_BUNDLE else r
        for r in dash_ag_grid._js_dist
    ]


def create_app(
    run_dirs: list[Path],
    cache_dir: Path | None = None,
    use_cache: bool = True,
    default_run: Path | None = None,
    read_ahead: bool = False,
) -> Dash:
    """The dashboard over `run_dirs`; parsed runs cached under `cache_dir` unless `use_cache` is off.
    `read_ahead`: start reading the runs (the first one shown first) in the background now, so
    that the first page finds its run read or well on the way."""
    store = RunStore(list(run_dirs), DiskCache(cache_dir) if use_cache else None)
    first = store.entries[0].run_id if store.entries else None
    if default_run is not None:
        first = next((e.run_id for e in store.entries if e.path == Path(default_run)), first)
    _ag_grid_on_demand()
    app = Dash(
        __name__,
        title="tpscope",
        assets_folder=str(ASSETS),
        serve_locally=True,
        suppress_callback_exceptions=False,
        update_title=None,
    )
    app.layout = build_layout(store.run_ids, first)
    register_callbacks(app, store)
    register_whatif(app, store)
    app.server.config["TPSCOPE_STORE"] = store
    if read_ahead:
        store.read_all_in_background(first)
    return app
