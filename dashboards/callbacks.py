"""Callbacks: read the chosen run from the store, call the pure figure builders, return them.

Every callback turns a run that cannot be read into a "not available" figure and a one-line
message, so one broken folder never stops the app from serving the others.
"""

from __future__ import annotations

import functools
import html as html_text
import io
import logging
import zipfile
from pathlib import Path

from dash import ALL, ClientsideFunction, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from tpscope.dashboards import focus, overlays, results, views
from tpscope.dashboards.figures import breakdown, collectives, contention, hta, overview, timeline
from tpscope.dashboards.figures import steps as steps_figure
from tpscope.dashboards.figures.common import fmt_ratio, not_available
from tpscope.dashboards.store import RunStore
from tpscope.dashboards.timeline_data import (
    link_arrays,
    overlay_segments,
    path_arrays,
    timeline_data,
)
from tpscope.errors import UserError
from tpscope.export.chrome_trace import rank_traces, trace_file_name, trace_text
from tpscope.jsonable import plain
from tpscope.metrics.findings import MIN_SHARE, findings, headroom_finding
from tpscope.numbers import size_text
from tpscope.text import escape_figure

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
                out = fn(*args)
                if figure_slots:  # names from traces and manifests are data, never plotly markup
                    out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                    for i in figure_slots:
                        if out[i] is not no_update and hasattr(out[i], "for_each_xaxis"):
                            escape_figure(out[i])
                    return out if n_outputs > 1 else out[0]
                return out
            except PreventUpdate:
                raise
            except Exception as exc:
                msg = _message(exc)
                out = [no_update] * n_outputs
                for i in figure_slots:
                    out[i] = escape_figure(not_available(msg))
                out[-1] = msg
                return tuple(out)

        return inner

    return wrap


def register_callbacks(app, store: RunStore) -> None:
    """Attach every callback of the page to `app`."""

    @app.callback(Output("want", "data"), Output("url-error", "children"), Input("url", "search"))
    def view_from_url(search):
        """The view the URL holds (on load, and on back and forward)."""
        try:
            view = views.parse_view(search)
            if "run" in view:
                store.entry(view["run"])
            if view.get("baseline"):
                store.entry(view["baseline"])
        except UserError as exc:
            return no_update, str(exc)
        if not view:
            raise PreventUpdate
        return view, ""

    @app.callback(
        Output("run-select", "value"),
        Output("tabs", "value"),
        Output("zoom", "data", allow_duplicate=True),
        Output("selection", "data"),
        Input("want", "data"),
        State("run-select", "value"),
        prevent_initial_call=True,
    )
    def go_to(want, current):
        """Open the view asked for (a URL or a click); the step, ranks and baseline follow in on_run."""
        if not want:
            raise PreventUpdate
        run_id = want.get("run") or current
        step = want.get("step")
        zoom = {"run": run_id, "step": step, "x": want["zoom"]} if want.get("zoom") else None
        sel = {"run": run_id, "step": step, **want["sel"]} if want.get("sel") else None
        return run_id, want.get("tab", no_update), zoom, sel

    @app.callback(
        Output("step-select", "options"),
        Output("step-select", "value"),
        Output("rank-select", "options"),
        Output("rank-select", "value"),
        Output("baseline-select", "value"),
        Output("step-strip", "figure"),
        Output("run-warnings", "children"),
        Output("run-error", "children"),
        Input("run-select", "value"),
        State("want", "data"),
    )
    def on_run(run_id, want):
        """The run's steps (with time and exposed share), ranks and baseline; a URL's or a click's
        step, ranks and baseline when it asked for this run."""
        try:
            loaded = store.load(run_id)
        except Exception as exc:
            return (
                [],
                None,
                [],
                [],
                None,
                not_available(_message(exc), height=110),
                "",
                _message(exc),
            )
        summaries = results.step_summaries(loaded.doc)
        steps = [s["step"] for s in summaries]
        ranks = loaded.doc.get("ranks") or []
        want = want if want and want.get("run", run_id) == run_id else {}
        step = want.get("step") if want.get("step") in steps else _slowest(summaries)
        chosen = [r for r in want.get("ranks") or [] if r in ranks] or list(ranks)
        baseline = want["baseline"] if "baseline" in want else _suggested(store, run_id)
        warnings = loaded.doc.get("warnings") or []
        note = f"{len(warnings)} warning(s): " + " | ".join(warnings[:5]) if warnings else ""
        return (
            [{"label": results.step_label(s), "value": s["step"]} for s in summaries],
            step,
            [{"label": f"rank {r}", "value": r} for r in ranks],
            chosen,
            baseline,
            steps_figure.strip_figure(summaries, step),
            note,
            "",
        )

    @app.callback(
        Output("step-strip", "figure", allow_duplicate=True),
        Input("step-select", "value"),
        State("run-select", "value"),
        prevent_initial_call=True,
    )
    def mark_step(step, run_id):
        try:
            return steps_figure.strip_figure(results.step_summaries(store.load(run_id).doc), step)
        except UserError:
            raise PreventUpdate from None

    app.clientside_callback(
        ClientsideFunction("tpscope", "writeUrl"),
        Output("url-sync", "data"),
        Input("run-select", "value"),
        Input("baseline-select", "value"),
        Input("step-select", "value"),
        Input("rank-select", "value"),
        Input("tabs", "value"),
        Input("zoom", "data"),
        Input("selection", "data"),
        State("run-select", "options"),
    )
    app.clientside_callback(
        ClientsideFunction("tpscope", "zoomFromRelayout"),
        Output("zoom", "data"),
        Input("timeline-graph", "relayoutData"),
        State("run-select", "value"),
        State("step-select", "value"),
    )

    @app.callback(
        Output("want", "data", allow_duplicate=True),
        Input("overview-table", "cellClicked"),
        Input("step-strip", "clickData"),
        Input("collectives-table", "cellClicked"),
        Input("breakdown-graph", "clickData"),
        Input("critical-path-graph", "clickData"),
        Input("contention-graph", "clickData"),
        Input("timeline-search", "value"),
        State("run-select", "value"),
        State("step-select", "value"),
        State("rank-select", "value"),
        State("collectives-table", "rowData"),
        State("zoom", "data"),
        prevent_initial_call=True,
    )
    def drill(
        run_click,
        strip_click,
        coll_click,
        breakdown_click,
        path_click,
        contention_click,
        search,
        run_id,
        step,
        ranks,
        coll_rows,
        zoom,
    ):
        """A click on a run, step, rank, collective, class or kernel: its place on the Timeline."""
        source = ctx.triggered_id
        want = {"run": run_id, "step": step, "ranks": ranks, "tab": "timeline"}
        if source == "overview-table":
            clicked = (run_click or {}).get("rowId")
            if clicked not in store.run_ids:
                raise PreventUpdate
            want = {"run": clicked, "tab": "timeline"}
        elif source in ("step-strip", "critical-path-graph"):
            point = _point(strip_click if source == "step-strip" else path_click)
            want["step"] = (
                int(point["customdata"][0]) if source == "step-strip" else _step_of(point["x"])
            )
        elif source == "breakdown-graph":
            point = _point(breakdown_click)
            rank, want["step"] = _rank_step_of(point["x"])
            want["ranks"] = sorted(set(ranks or []) | {rank})
            kind = breakdown.CLASS_OF_SERIES.get((point.get("data") or {}).get("name")) or _series(
                breakdown_click
            )
            if kind:
                want["sel"] = {"kind": "class", "key": kind}
        elif source == "collectives-table":
            row = _clicked_row(coll_click, coll_rows)
            want["step"] = int(row["step"])
            _zoom_to_collective(want, store, run_id, ranks, str(row["key"]))
            want["sel"] = {"kind": "collective", "key": str(row["key"])}
        elif source == "contention-graph":
            point = _point(contention_click)
            if point.get("customdata") is None:
                raise PreventUpdate
            want["sel"] = contention.clicked_selection(point["customdata"])
        elif source == "timeline-search":
            zoom = views.pinned(zoom, run_id, step)
            if zoom:
                want["zoom"] = zoom["x"]  # a search outlines what the view holds; it keeps the zoom
            if (search or "").strip():
                want["sel"] = {"kind": "search", "key": search.strip()}
        else:
            raise PreventUpdate
        return want

    @app.callback(
        Output("findings-title", "children"),
        Output("overview-findings", "children"),
        Output("findings-targets", "data"),
        Output("overview-graph", "figure"),
        Output("overview-path-graph", "figure"),
        Input("run-select", "value"),
        Input("overview-poll", "n_intervals"),
        Input("tabs", "value"),
        State("findings-targets", "data"),
    )
    @guarded(5, (3, 4))
    def on_overview_run(run_id, _tick, tab, shown):
        """The chosen run at a glance: its findings in words, ranked by the time they cost per
        step, each a link to its activities; per rank and step, where the time goes; the
        critical path's parts (metrics.md §4, §7)."""
        _only_on(tab, "overview")
        if not run_id:
            raise PreventUpdate
        if (shown or {}).get("run") == run_id and ctx.triggered_id == "overview-poll":
            raise PreventUpdate  # drawn already: a poll for other runs leaves it (and its clicks)
        try:  # waits for the run as the step picker does: drawn the moment it is read
            got = store.load(run_id)
        except Exception:
            raise PreventUpdate from None  # the runs table and the error line say why
        doc = got.doc
        found = findings(doc)[:FINDINGS_SHOWN]
        room = store.headroom(run_id)  # the what-if bound (metrics.md §11), listed last
        if room is not None:
            found.append(headroom_finding(room.what, room.speedup))
        items = [
            html.Li(
                [
                    html.Button(
                        f.title, id={"type": "finding", "index": k}, n_clicks=0, className="link"
                    ),
                    html.Span(" " + f.text, className="finding-text"),
                ]
            )
            for k, f in enumerate(found)
        ]
        targets = {
            "run": run_id,
            "targets": [{"step": f.step, "sel": f.sel or None, "kind": f.kind} for f in found],
        }
        title = (
            f"What matters in {run_id}, by time per step (click one to see its activities)"
            if found
            else f"{run_id}: no cost above {MIN_SHARE:.1%} of the step found"
        )
        return (
            title,
            items,
            targets,
            overview.stack_figure(results.step_rows(doc)),
            overview.path_figure(breakdown.critical_path_figure(results.critical_path_rows(doc))),
        )

    @app.callback(
        Output("want", "data", allow_duplicate=True),
        Output("timeline-options", "value", allow_duplicate=True),
        Input({"type": "finding", "index": ALL}, "n_clicks"),
        State("findings-targets", "data"),
        State("run-select", "value"),
        State("step-select", "value"),
        State("rank-select", "value"),
        State("timeline-options", "value"),
        prevent_initial_call=True,
    )
    def open_finding(clicks, targets, run_id, step, ranks, options):
        """A finding's activities on the Timeline: its step (else the one on view), its selection
        (a collective zoomed; for host-bound time a GPU run's CPU threads' lanes shown); the
        What-if tab for the headroom."""
        trigger = ctx.triggered_id
        if not isinstance(trigger, dict) or not any(clicks or []):
            raise PreventUpdate
        k = int(trigger["index"])
        targets = (targets or {}).get("targets") or []
        if k >= len(targets) or k >= len(clicks) or not clicks[k]:
            raise PreventUpdate
        target = targets[k]
        if target.get("kind") == "headroom":  # a replay's bound: the replay itself
            return {"run": run_id, "tab": "whatif", "ranks": ranks}, no_update
        # a selection holds for one step: a finding over every step (a GEMM shape) shows its
        # activities in the step on view
        want = {"run": run_id, "tab": "timeline", "ranks": ranks, "step": step}
        if target.get("step") is not None:
            want["step"] = int(target["step"])
        sel = target.get("sel")
        shown = no_update
        if sel:
            want["sel"] = sel
            if sel["kind"] == "collective" and want.get("step") is not None:
                _zoom_to_collective(want, store, run_id, ranks, str(sel["key"]))
            if target.get("kind") == "host" and not store.load(run_id).doc.get("cpu_run"):
                shown = sorted({*(options or []), "launches"})  # where host time is spent
        return want, shown

    @app.callback(
        Output("overview-table", "rowData"),
        Output("baseline-note", "children"),
        Output("overview-poll", "disabled"),
        Input("run-select", "value"),
        Input("baseline-select", "value"),
        Input("overview-poll", "n_intervals"),
    )
    @guarded(3)
    def on_overview(run_id, baseline_id, _tick):
        """Every run's line as its analysis arrives (read one by one in the background); the page
        asks again while some are still being read."""
        store.read_all_in_background()
        rows, pending = [], 0
        for run in store.run_ids:
            got = store.ready(run)
            if got is None:
                rows.append(results.pending_row(run))
                pending += 1
            elif isinstance(got, Exception):
                rows.append(results.error_row(run, str(got)))
            else:
                row = results.overview_row(run, got.doc, got.run.manifest)
                ready = store.ready(baseline_id) if baseline_id else None
                compared = _compared_summary(store, run, baseline_id) if ready is not None else None
                rows.append(results.with_baseline(row, compared))
        base_ready = (
            bool(run_id)
            and store.ready(run_id) is not None
            and (not baseline_id or store.ready(baseline_id) is not None)
        )
        note = _baseline_note(store, run_id, baseline_id) if base_ready else ""
        return rows, note, pending == 0

    @app.callback(
        Output("timeline-graph", "figure"),
        Output("timeline-note", "children"),
        Input("run-select", "value"),
        Input("step-select", "value"),
        Input("rank-select", "value"),
        Input("zoom", "data"),
        Input("selection", "data"),
        Input("timeline-options", "value"),
        Input("tabs", "value"),
    )
    @guarded(2, (0,))
    def on_timeline(run_id, step, ranks, zoom, selection, options, tab):
        _only_on(tab, "timeline")
        loaded = store.load(run_id)
        if step is None or not ranks:
            return not_available("pick a step and at least one rank"), ""
        offsets = {int(k): v for k, v in (loaded.doc.get("clock_offsets_us") or {}).items()}
        # zoomed: draw what the window holds (cap, label names)
        zoom = views.pinned(zoom, run_id, step)
        window = tuple(zoom["x"]) if zoom else None
        data = timeline_data(
            loaded.run,
            step,
            ranks,
            window_us=window,
            offsets_us=offsets,
            launches="launches" in (options or []),
        )
        fig, note = _timeline(store, run_id, data, step, views.pinned(selection, run_id, step))
        fig.update_layout(uirevision=f"{run_id}|{step}|{sorted(ranks)}|{window}")
        return fig, note

    @app.callback(
        Output("perfetto-download", "data"),
        Output("timeline-note", "children", allow_duplicate=True),
        Input("perfetto-button", "n_clicks"),
        State("run-select", "value"),
        State("step-select", "value"),
        State("rank-select", "value"),
        prevent_initial_call=True,
    )
    @guarded(2)
    def to_perfetto(clicks, run_id, step, ranks):
        """The chosen step on the chosen ranks as Chrome/Kineto traces, one per rank, zipped as the
        folder `tpscope export` writes (tpscope.export)."""
        if not clicks or step is None:
            raise PreventUpdate
        loaded = store.load(run_id)
        traces = rank_traces(
            loaded.run,
            store.activity_detail(run_id),
            step,
            ranks or None,
            loaded.doc.get("clock_offsets_us"),
            loaded.analysis.kernel_contention,
        )
        folder = f"{run_id}-export-step-{step}"
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
            for rank, t in traces.items():
                z.writestr(f"{folder}/{trace_file_name(rank, t)}", trace_text(t))
        return (
            dcc.send_bytes(buffer.getvalue(), f"{folder}.zip"),
            f"Wrote {folder}.zip, one trace per rank: open a file at ui.perfetto.dev (Open trace "
            "file) or in chrome://tracing, or the unzipped folder with HTA or tpscope.",
        )

    @app.callback(
        Output("breakdown-graph", "figure"),
        Output("critical-path-graph", "figure"),
        Input("run-select", "value"),
        Input("rank-select", "value"),
        Input("tabs", "value"),
    )
    @guarded(2, (0, 1))
    def on_breakdown(run_id, ranks, tab):
        _only_on(tab, "breakdown")
        doc = store.load(run_id).doc
        return (
            breakdown.breakdown_figure(results.step_rows(doc, ranks or [])),
            breakdown.critical_path_figure(results.critical_path_rows(doc)),
        )

    @app.callback(
        Output("collectives-table", "rowData"),
        Output("collectives-table", "columnDefs"),
        Output("skew-graph", "figure"),
        Output("arrival-graph", "figure"),
        Output("collectives-note", "children"),
        Input("run-select", "value"),
        Input("step-select", "value"),
        Input("tabs", "value"),
    )
    @guarded(5, (2, 3))
    def on_collectives(run_id, step, tab):
        _only_on(tab, "collectives")
        loaded = store.load(run_id)
        rows = results.collective_rows(loaded.doc, step)
        note = (
            f"Step {step}: {len(rows)} matched collective instance(s)."
            if rows
            else f"Step {step}: no matched collectives reported for this run (not available)."
        )
        detail = store.activity_detail(run_id)
        members = (
            overlays.collective_members(detail, step)
            if detail is not None and step is not None
            else None
        )
        arrival = (members.rank, overlays.arrival_us(members)) if members is not None else ([], [])
        return (
            rows,
            collectives.table_columns(rows),
            collectives.skew_figure(rows),
            collectives.arrival_figure(*arrival),
            note,
        )

    @app.callback(
        Output("contention-graph", "figure"),
        Output("comm-contention-graph", "figure"),
        Output("tax-graph", "figure"),
        Output("contention-note", "children"),
        Input("run-select", "value"),
        Input("baseline-select", "value"),
        Input("rank-select", "value"),
        Input("tabs", "value"),
    )
    @guarded(4, (0, 1, 2))
    def on_contention(run_id, baseline_id, ranks, tab):
        _only_on(tab, "contention")
        loaded = store.load(run_id)
        compared = bool(baseline_id) and baseline_id != run_id
        analysis = store.compared(run_id, baseline_id) if compared else loaded.analysis
        doc = plain(analysis) if compared else loaded.doc
        summary = doc.get("summary") or {}
        slowdown, coverage = summary.get("contention_slowdown"), summary.get("contention_coverage")
        note = f"Run contention slowdown: {fmt_ratio(slowdown)}"
        note += (
            f" (isolated medians from baseline {baseline_id} where the run has none)."
            if compared
            else "."
        )
        if coverage is not None:
            note += f" It covers {fmt_ratio(coverage)} of the overlapped GEMM time (metrics.md §8)."
        note += results.gemm_budget_text(analysis)
        gemms = results.gemm_contention_rows(analysis)
        return (
            contention.gemm_contention_figure(gemms)
            if gemms
            else contention.contention_figure(
                results.contention_rows(analysis), cpu_run=bool(doc.get("cpu_run"))
            ),
            contention.comm_contention_figure(results.comm_contention_rows(analysis)),
            contention.tax_figure(results.step_rows(doc, ranks or [])),
            note,
        )

    @app.callback(
        Output("hta-status", "children"), Input("run-select", "value"), Input("tabs", "value")
    )
    def hta_status(run_id, tab):
        """Says at once, while HTA works, what it is doing and that it is done only once per run."""
        if (
            tab != "hta"
            or store.ready(run_id) is None
            or isinstance(store.ready(run_id), Exception)
        ):
            return ""
        if store.hta_cached(run_id):
            return ""
        size = sum(
            Path(r.path).stat().st_size
            for r in store.load(run_id).run.ranks
            if Path(r.path).exists()
        )
        return (
            f"HTA is parsing the {size_text(size)} of trace files of {run_id} with its own parser (tpscope's "
            "parse is not shared); this happens once per run: its results are then cached on disk like the "
            "analyzer's."
        )

    @app.callback(
        Output("hta-temporal-graph", "figure"),
        Output("hta-idle-graph", "figure"),
        Output("hta-figures", "style"),
        Output("hta-note", "children"),
        Output("hta-status", "children", allow_duplicate=True),
        Input("run-select", "value"),
        Input("tabs", "value"),
        prevent_initial_call="initial_duplicate",
    )
    @guarded(5, (0, 1))
    def on_hta(run_id, tab):
        """HTA's figures, or its one line (the figures hidden); the status line ("HTA is parsing
        ...") cleared."""
        if tab != "hta":
            raise PreventUpdate  # HTA parses the traces again: only when its tab is open
        result = store.hta(run_id)
        if result.error:
            blank = not_available("")
            return blank, blank, {"display": "none"}, result.error, ""
        note = (
            "Computed by Holistic Trace Analysis over the whole trace (every step, every stream), "
            "so its totals differ from tpscope's per-step windows."
        )
        partial = getattr(result, "partial", None)  # absent from results cached by older versions
        if partial:
            note = f"{partial} {note}"
        return hta.temporal_figure(result.temporal), hta.idle_figure(result.idle), {}, note, ""


FINDINGS_SHOWN = 6  # the Overview's findings, largest cost first


def _only_on(tab: str | None, name: str) -> None:
    """A view computes only while its tab is open: a run still being read then holds one request
    per open view, not one per view (a browser has six connections to the server)."""
    if tab != name:
        raise PreventUpdate


def _slowest(summaries: list[dict]) -> int | None:
    return next((s["step"] for s in summaries if s["slowest"]), None)


def _suggested(store: RunStore, run_id) -> str | None:
    """A fused run opens against the unfused run of its experiment, when one is served."""
    try:
        return store.suggested_baseline(run_id)
    except UserError:
        return None


def _zoom_to_collective(want: dict, store, run_id, ranks, key: str) -> None:
    """Set `want`'s zoom to the window of collective `key` in `want["step"]`, when it has one."""
    loaded = store.load(run_id)
    window = focus.collective_window(
        loaded.run,
        store.activity_detail(run_id),
        want["step"],
        ranks or [],
        loaded.doc.get("clock_offsets_us") or {},
        key,
    )
    if window is not None:
        want["zoom"] = window


def _point(click: dict | None) -> dict:
    """The clicked point, its labels as the figure's data held them (escape_figure undone)."""
    points = (click or {}).get("points") or []
    if not points:
        raise PreventUpdate
    return {k: _unescaped(v) for k, v in points[0].items()}


def _unescaped(value):
    if isinstance(value, str):
        return html_text.unescape(value)
    if isinstance(value, list):
        return [_unescaped(v) for v in value]
    return value


def _clicked_row(click: dict | None, rows: list[dict] | None) -> dict:
    """The collectives row a cellClicked event names (row ids are the instances' keys)."""
    row_id = (click or {}).get("rowId")
    row = next((r for r in rows or [] if str(r.get("key")) == str(row_id)), None)
    if row is None:
        raise PreventUpdate
    return row


def _step_of(label: str) -> int:
    return int(str(label).rsplit(" ", 1)[-1])


def _rank_step_of(label: str) -> tuple[int, int]:
    """`rank 1 · step 3` (a Breakdown bar) -> (1, 3)."""
    rank, step = str(label).split(" · ")
    return int(rank.split()[-1]), int(step.split()[-1])


def _series(click: dict) -> str | None:
    """The class of activity the clicked Breakdown series stands for (its curve's legend name)."""
    curve = _point(click).get("curveNumber")
    names = [name for _, name, _ in breakdown.STACK]
    return (
        breakdown.CLASS_OF_SERIES.get(names[curve])
        if isinstance(curve, int) and curve < len(names)
        else None
    )


def _timeline(store, run_id, data, step, selection=None):
    """The timeline figure with the cross-rank overlays the analyzer's functions provide."""
    if data is None:
        return timeline.timeline_figure(None), timeline.timeline_note(None)
    detail = store.activity_detail(run_id)
    members = _overlay(overlays.collective_members, detail, step)
    waits = overlay_segments(data, _overlay(overlays.wait_parts, detail, step))
    path_overlay = _overlay(overlays.critical_path, detail, step)
    path = path_arrays(data, path_overlay)
    links = link_arrays(data, members)
    shapes = store.gemm_shapes(run_id) if selection and selection.get("kind") == "gemm" else None
    selected = focus.selected_segments(data, detail, selection, shapes, path_overlay)
    label = f"{selection['kind']}:{selection['key']}" if selection else None
    fig = timeline.timeline_figure(
        data, waits=waits, links=links, path=path, selected=selected, selection=label
    )
    note = timeline.timeline_note(data)
    if selection:
        note += (
            f" Selected {selection['kind']} {selection['key']}: {len(selected)} activit"
            f"{'y' if len(selected) == 1 else 'ies'} outlined in yellow."
        )
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
    """The run's summary against the baseline; None without one, when either cannot be read, or
    when their manifests name different experiments (metrics.md §9)."""
    if not baseline_id or baseline_id == run_id:
        return None
    try:
        if store.incomparable(run_id, baseline_id):
            return None
        return plain(store.compared(run_id, baseline_id).summary)
    except UserError:
        return None


def _baseline_note(store: RunStore, run_id, baseline_id) -> str:
    if not baseline_id:
        return (
            "Pick a baseline (an unfused run) to see Flux overlap efficiency and attained saving."
        )
    if baseline_id == run_id:
        return "The baseline is the run itself: pick another run as baseline."
    why = store.incomparable(run_id, baseline_id)
    if why:
        return (
            f"{run_id} against baseline {baseline_id}: Flux overlap efficiency and attained saving not "
            f"shown: the runs are different experiments ({why}); pick a baseline of the same regime "
            "and model (metrics.md §9)."
        )
    summary = plain(store.compared(run_id, baseline_id).summary)
    return (
        f"{run_id} against baseline {baseline_id}: Flux overlap efficiency "
        f"{fmt_ratio(summary.get('flux_overlap_efficiency'))}, attained saving "
        f"{fmt_ratio(summary.get('attained_saving'))}."
    )
