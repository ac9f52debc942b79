"""Callbacks: read the chosen run from the store, call the pure figure builders, return them.

Every callback turns a run that cannot be read into a "not available" figure and a one-line
message, so one broken folder never stops the app from serving the others.
"""

from __future__ import annotations

import functools
import logging
from urllib.parse import parse_qs

from dash import Input, Output, ctx, no_update
from dash.exceptions import PreventUpdate
from tpscope.dashboards import overlays, results
from tpscope.dashboards.figures import breakdown, collectives, contention, hta, overview, timeline
from tpscope.dashboards.figures.common import fmt_ratio, not_available
from tpscope.dashboards.store import RunStore
from tpscope.dashboards.timeline_data import (
    link_arrays,
    overlay_segments,
    path_arrays,
    timeline_data,
)

from tpscope.errors import UserError

log = logging.getLogger("tpscope.dash")


def _message(exc: BaseException) -> str:
    if isinstance(exc, UserError):
        return str(exc)
    log.exception("dashboard callback failed")
    return f"internal error ({type(exc).__name__}: {exc})".splitlines()[0]


def guarded(n_outputs: int, figure_slots: tuple[int, ...] = ()):
    """On any error: "not available" figures in `figure_slots`, the message in the last output."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args):
            try:
                return fn(*args)
            except PreventUpdate:
                raise
            except Exception as exc:
                msg = _message(exc)
                out = [no_update] * n_outputs
                for i in figure_slots:
                    out[i] = not_available(msg)
                out[-1] = msg
                return tuple(out)

        return inner

    return wrap


def register_callbacks(app, store: RunStore) -> None:
    """Attach every callback of the page to `app`."""

    @app.callback(Output("run-select", "value"), Output("url-error", "children"), Input("url", "search"))
    def run_from_url(search):
        wanted = parse_qs((search or "").lstrip("?")).get("run")
        if not wanted:
            raise PreventUpdate
        try:
            return store.entry(wanted[0]).run_id, ""
        except UserError as exc:
            return no_update, str(exc)

    @app.callback(Output("baseline-select", "value"), Input("run-select", "value"))
    def suggest_baseline(run_id):
        """A fused run opens against the unfused run of its experiment, when one is served."""
        try:
            return store.suggested_baseline(run_id)
        except UserError:
            return None

    @app.callback(
        Output("step-select", "options"), Output("step-select", "value"),
        Output("rank-select", "options"), Output("rank-select", "value"),
        Output("run-warnings", "children"), Output("run-error", "children"),
        Input("run-select", "value"),
    )
    def on_run(run_id):
        try:
            loaded = store.load(run_id)
        except Exception as exc:
            return [], None, [], [], "", _message(exc)
        steps = results.step_numbers(loaded.doc)
        ranks = loaded.doc.get("ranks") or []
        warnings = loaded.doc.get("warnings") or []
        note = f"{len(warnings)} warning(s): " + " | ".join(warnings[:5]) if warnings else ""
        return ([{"label": f"step {s}", "value": s} for s in steps], steps[0] if steps else None,
                [{"label": f"rank {r}", "value": r} for r in ranks], list(ranks), note, "")

    @app.callback(
        Output("overview-table", "rowData"), Output("overview-graph", "figure"), Output("baseline-note", "children"),
        Input("run-select", "value"), Input("baseline-select", "value"),
    )
    @guarded(3, (1,))
    def on_overview(run_id, baseline_id):
        rows = []
        for run in store.run_ids:
            try:
                loaded = store.load(run)
                row = results.overview_row(run, loaded.doc, loaded.run.manifest)
                rows.append(results.with_baseline(row, _compared_summary(store, run, baseline_id)))
            except UserError as exc:
                rows.append(results.error_row(run, str(exc)))
        return rows, overview.ratios_figure(rows), _baseline_note(store, run_id, baseline_id)

    @app.callback(
        Output("timeline-graph", "figure"), Output("timeline-note", "children"),
        Input("run-select", "value"), Input("step-select", "value"), Input("rank-select", "value"),
        Input("timeline-graph", "relayoutData"),
    )
    @guarded(2, (0,))
    def on_timeline(run_id, step, ranks, relayout):
        loaded = store.load(run_id)
        if step is None or not ranks:
            return not_available("pick a step and at least one rank"), ""
        offsets = {int(k): v for k, v in (loaded.doc.get("clock_offsets_us") or {}).items()}
        window = None
        if ctx.triggered_id == "timeline-graph":
            window = _window(relayout)  # zoomed: draw what the window holds (cap, label names)
        data = timeline_data(loaded.run, step, ranks, window_us=window, offsets_us=offsets)
        fig, note = _timeline(store, run_id, data, step)
        fig.update_layout(uirevision=f"{run_id}|{step}|{sorted(ranks)}")
        return fig, note

    @app.callback(
        Output("breakdown-graph", "figure"), Output("critical-path-graph", "figure"),
        Input("run-select", "value"), Input("rank-select", "value"),
    )
    @guarded(2, (0, 1))
    def on_breakdown(run_id, ranks):
        doc = store.load(run_id).doc
        return (breakdown.breakdown_figure(results.step_rows(doc, ranks or [])),
                breakdown.critical_path_figure(results.critical_path_rows(doc)))

    @app.callback(
        Output("collectives-table", "rowData"), Output("collectives-table", "columnDefs"),
        Output("skew-graph", "figure"), Output("arrival-graph", "figure"), Output("collectives-note", "children"),
        Input("run-select", "value"), Input("step-select", "value"),
    )
    @guarded(5, (2, 3))
    def on_collectives(run_id, step):
        loaded = store.load(run_id)
        rows = results.collective_rows(loaded.doc, step)
        note = (f"Step {step}: {len(rows)} matched collective instance(s)." if rows else
                f"Step {step}: no matched collectives reported for this run (not available).")
        detail = store.activity_detail(run_id)
        members = overlays.collective_members(detail, step) if detail is not None and step is not None else None
        arrival = (members.rank, overlays.arrival_us(members)) if members is not None else ([], [])
        return (rows, collectives.table_columns(rows), collectives.skew_figure(rows),
                collectives.arrival_figure(*arrival), note)

    @app.callback(
        Output("contention-graph", "figure"), Output("comm-contention-graph", "figure"),
        Output("tax-graph", "figure"), Output("contention-note", "children"),
        Input("run-select", "value"), Input("baseline-select", "value"), Input("rank-select", "value"),
    )
    @guarded(4, (0, 1, 2))
    def on_contention(run_id, baseline_id, ranks):
        loaded = store.load(run_id)
        compared = bool(baseline_id) and baseline_id != run_id
        analysis = store.compared(run_id, baseline_id) if compared else loaded.analysis
        doc = results.plain(analysis) if compared else loaded.doc
        summary = doc.get("summary") or {}
        slowdown, coverage = summary.get("contention_slowdown"), summary.get("contention_coverage")
        note = f"Run contention slowdown: {fmt_ratio(slowdown)}"
        note += f" (isolated medians from baseline {baseline_id} where the run has none)." if compared else "."
        if coverage is not None:
            note += f" It covers {fmt_ratio(coverage)} of the overlapped GEMM time (metrics.md §8)."
        note += results.gemm_budget_text(analysis)
        gemms = results.gemm_contention_rows(analysis)
        return (contention.gemm_contention_figure(gemms) if gemms
                else contention.contention_figure(results.contention_rows(analysis)),
                contention.comm_contention_figure(results.comm_contention_rows(analysis)),
                contention.tax_figure(results.step_rows(doc, ranks or [])), note)

    @app.callback(
        Output("hta-temporal-graph", "figure"), Output("hta-idle-graph", "figure"), Output("hta-note", "children"),
        Input("run-select", "value"), Input("tabs", "value"),
    )
    @guarded(3, (0, 1))
    def on_hta(run_id, tab):
        if tab != "hta":
            raise PreventUpdate  # HTA parses the traces again: only when its tab is open
        result = store.hta(run_id)
        if result.error:
            return not_available(result.error), not_available(result.error), result.error
        note = ("Computed by Holistic Trace Analysis over the whole trace (every step, every stream), "
                "so its totals differ from tpscope's per-step windows.")
        return hta.temporal_figure(result.temporal), hta.idle_figure(result.idle), note


def _window(relayout: dict | None) -> tuple[float, float] | None:
    if not relayout or relayout.get("xaxis.autorange"):
        return None
    lo, hi = relayout.get("xaxis.range[0]"), relayout.get("xaxis.range[1]")
    if lo is None and isinstance(relayout.get("xaxis.range"), list):
        lo, hi = relayout["xaxis.range"]
    if lo is None or hi is None:
        raise PreventUpdate  # a y-only or legend relayout
    return float(lo), float(hi)


def _timeline(store, run_id, data, step):
    """The timeline figure with the cross-rank overlays the analyzer's functions provide."""
    if data is None:
        return timeline.timeline_figure(None), timeline.timeline_note(None)
    detail = store.activity_detail(run_id)
    members = _overlay(overlays.collective_members, detail, step)
    waits = overlay_segments(data, _overlay(overlays.wait_parts, detail, step))
    path = path_arrays(data, _overlay(overlays.critical_path, detail, step))
    links = link_arrays(data, members)
    fig = timeline.timeline_figure(data, waits=waits, links=links, path=path)
    note = timeline.timeline_note(data)
    missing = []
    if path is None or not len(path[0]):
        missing.append("critical path")
    if not len(links[0]):
        missing.append("collective links")
    if missing:
        note += " Not available for this step and ranks: " + ", ".join(missing) + "."
    return fig, note


def _overlay(build, detail, step):
    """An overlay of the analyzer's per-activity results, or None (drawn as "not available")."""
    if detail is None:
        return None
    try:
        return build(detail, step)
    except Exception:  # the timeline itself still draws; the note says what is missing
        log.exception("timeline overlay %s", build.__name__)
        return None


def _compared_summary(store: RunStore, run_id, baseline_id) -> dict | None:
    """The run's summary against the baseline; None without one or when either cannot be read."""
    if not baseline_id or baseline_id == run_id:
        return None
    try:
        return results.plain(store.compared(run_id, baseline_id).summary)
    except UserError:
        return None


def _baseline_note(store: RunStore, run_id, baseline_id) -> str:
    if not baseline_id:
        return "Pick a baseline (an unfused run) to see Flux overlap efficiency and attained saving."
    if baseline_id == run_id:
        return "The baseline is the run itself: pick another run as baseline."
    summary = results.plain(store.compared(run_id, baseline_id).summary)
    return (f"{run_id} against baseline {baseline_id}: Flux overlap efficiency "
            f"{fmt_ratio(summary.get('flux_overlap_efficiency'))}, attained saving "
            f"{fmt_ratio(summary.get('attained_saving'))}.")
