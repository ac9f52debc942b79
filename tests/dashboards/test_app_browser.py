"""The dashboard in real headless Chromium, on (copies of) the real H200 runs.

Expected numbers come from the analyzer's JSON (`as_json(analyze_run(...))`), from the trace
tables, or from HTA, all computed here; never from the dashboard's own code.
"""

from __future__ import annotations

import http.client
import time
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
import requests
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By

from tests.dashboards.browser import (
    choose,
    console,
    figure,
    open_tab,
    overview_ready,
    slowest_step,
    table_rows,
    text_of,
    toggle,
    trace,
    values,
    wait_figure,
    wait_until,
)
from tests.dashboards.conftest import CHUNKED, UNFUSED, Served
from tpscope.metrics import analyze_run
from tpscope.numbers import size_text
from tpscope.trace import ActivityClass, load_run

pytestmark = pytest.mark.timeout(120)
STACK = {
    "hidden comm": "hidden_comm_us",
    "exposed comm": "exposed_comm_us",
    "memory": "memory_us",
    "idle": "idle_us",
}


EXPECTED_CONSOLE = ()
"""Console messages a test may leave (texts they hold); any other message, of any level, fails."""


@pytest.fixture(autouse=True)
def no_console_messages(browser):
    browser.get_log("browser")  # drop what earlier tests left
    yield
    messages = console(browser, EXPECTED_CONSOLE)
    assert messages == [], messages


@pytest.fixture
def page(browser, served):
    browser.get(served.url)
    wait_until(browser, lambda d: overview_ready(d, 3))
    return browser


def _fmt_ratio(v):
    return "" if v is None else f"{v:.1%}"


def _step_window_counts(run, step, ranks):
    """Activities per class overlapping the step's extent over `ranks` (from the trace tables)."""
    lo = min(
        int(r.steps.start_ns[r.steps.step == step].min()) for r in run.ranks if r.rank in ranks
    )
    hi = max(int(r.steps.end_ns[r.steps.step == step].max()) for r in run.ranks if r.rank in ranks)
    counts = dict.fromkeys(("compute", "comm", "memory"), 0)
    for r in run.ranks:
        if r.rank in ranks:
            m = (r.gpu.start_ns < hi) & (r.gpu.end_ns > lo)
            for cls in ("compute", "comm", "memory"):
                counts[cls] += int((m & (r.gpu.cls == ActivityClass[cls.upper()])).sum())
    return counts


def _segments(fig, name):
    """Number of NaN-separated segments of a timeline trace (0 when the trace is absent)."""
    t = trace(fig, name)
    return 0 if t is None else int(np.isnan(values(t["x"]).astype(float)).sum())


def test_app_starts_on_sample_runs_and_overview_shows_summaries(
    page, expected, not_a_run, tmp_path
):
    shots = tmp_path
    rows = {r["run"]: r for r in table_rows(page, "overview-table")}
    assert set(rows) == {CHUNKED.name, UNFUSED.name, not_a_run.name}
    for run_id, exp in expected.items():
        s = exp["doc"]["summary"]
        assert rows[run_id]["step time (µs)"] == f"{s['step_time_us']:,.1f}"
        assert rows[run_id]["exposed comm"] == _fmt_ratio(s["exposed_comm_ratio"])
        assert rows[run_id]["hidden of hideable comm"] == _fmt_ratio(s["hidden_of_hideable_ratio"])
        assert rows[run_id]["critical-path exposed comm"] == _fmt_ratio(
            s["critical_path_exposed_comm_ratio"]
        )
        assert rows[run_id]["ranks"] == str(len(exp["doc"]["ranks"]))
    assert "no trace files" in rows[not_a_run.name]["status"]
    assert rows[CHUNKED.name]["status"] == (
        "ok"
        if not expected[CHUNKED.name]["doc"]["warnings"]
        else f"{len(expected[CHUNKED.name]['doc']['warnings'])} warning(s)"
    )
    # the chosen run at a glance: per rank and step, the §4 partition as stacked bars
    run_id = page.find_element(By.ID, "run-select").text.strip()
    doc = expected[run_id]["doc"]
    fig = wait_figure(page, "overview-graph", lambda f: trace(f, "exposed comm") is not None)
    for name, field in (("exposed comm", "exposed_comm_us"), ("hidden comm", "hidden_comm_us")):
        bars = trace(fig, name)
        got = dict(zip(values(bars["x"]), values(bars["y"]).astype(float)))
        want = {f"rank {s['rank']} · step {s['step']}": s[field] for s in doc["steps"]}
        assert got == pytest.approx(want)
    path = wait_figure(page, "overview-path-graph", lambda f: len(f["data"]) > 0)
    assert trace(path, "comm") is not None
    # its findings in words, the exposed communication among them, with the JSON's mean over
    # the ranks and the steps after the first
    counted = [s for s in doc["steps"] if not s["first_step"]]
    exposed = sum(s["exposed_comm_us"] for s in counted) / len(counted)
    items = wait_until(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#overview-findings li"))
    texts = [i.text for i in items]
    assert len(texts) >= 3, texts
    assert any(f"Exposed communication: {exposed:,.0f} µs per step" in t for t in texts), texts
    headers = page.execute_script(
        "return Array.from(document.querySelectorAll('#overview-table .ag-header-cell'))"
        ".map(h => [h.innerText, h.getAttribute('title') || ''])"
    )
    assert headers  # every header with a definition carries it (the grid's tooltip)
    # the runs table fits the 1400-px window: every column in view, none scrolled off sideways
    fit = page.execute_script(
        "const g = document.querySelector('#overview-table .ag-root-wrapper').getBoundingClientRect();"
        "const v = document.querySelector('#overview-table .ag-center-cols-viewport');"
        "return [v.scrollWidth - v.clientWidth, Math.max(...Array.from("
        "document.querySelectorAll('#overview-table .ag-header-cell'))"
        ".map(h => h.getBoundingClientRect().right)) - g.right];"
    )
    assert fit[0] <= 1 and fit[1] <= 1, fit
    page.save_screenshot(str(shots / "overview.png"))
    # one click from a collective's finding to its kernels on the Timeline
    link = next(
        a
        for a in page.find_elements(By.CSS_SELECTOR, "#overview-findings li button")
        if a.text.startswith("Collective ")
    )
    key = link.text.split()[1].rstrip(":")
    link.click()
    wait_until(
        page, lambda d: "sel=collective" in unquote(d.current_url) and key in unquote(d.current_url)
    )
    wait_figure(page, "timeline-graph", lambda f: len(f["data"]) > 0)
    page.save_screenshot(str(shots / "finding-on-timeline.png"))


def test_the_page_draws_with_the_served_plotly_bundle_which_has_every_trace_type_used(page, served):
    """The page's plotly.js is the partial bundle served from the dashboard's assets: the version
    the installed plotly package ships, every trace type the dashboard's code builds registered,
    and the full bundle never fetched. AG Grid's bundle is not on the page as it arrives: it is
    fetched once a chart is drawn, and the runs table then fills."""
    import re

    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseTraceType
    from plotly.offline import get_plotlyjs_version

    import tpscope.dashboards

    # every trace class the dashboard's code names (`go.Scatter`, ...), as plotly.js's type name
    root = Path(tpscope.dashboards.__file__).parent
    named = {m for f in root.rglob("*.py") for m in re.findall(r"\bgo\.([A-Z]\w*)", f.read_text())}
    used = {
        getattr(go, m)().type
        for m in named
        if isinstance(getattr(go, m, None), type) and issubclass(getattr(go, m), BaseTraceType)
    }
    assert {"scatter", "scattergl", "bar"} <= used  # the scan finds what it is meant to
    wait_figure(page, "overview-graph", lambda f: len(f["data"]) > 0)
    got = page.execute_script(
        "return {version: Plotly.version,"
        " traces: Object.keys(Plotly.PlotSchema.get().traces),"
        " scripts: performance.getEntriesByType('resource').map(e => e.name)};"
    )
    assert got["version"] == get_plotlyjs_version()
    assert used <= set(got["traces"]), (used, got["traces"])
    names = [u.split("?")[0].rsplit("/", 1)[-1] for u in got["scripts"]]
    assert "plotly-partial.min.js" in names
    assert not [n for n in names if n.startswith("plotly.min")], names
    assert "_dash-component-suites/dash_ag_grid/" not in requests.get(served.url, timeout=30).text
    rows = wait_until(page, lambda d: table_rows(d, "overview-table"))
    assert {r["run"] for r in rows} >= {CHUNKED.name, UNFUSED.name}


def test_baseline_gives_flux_efficiency_and_attained_saving(page, expected):
    run_id = page.find_element("id", "run-select").text.strip()
    base_id = next(k for k in expected if k != run_id)
    choose(page, "baseline-select", base_id)
    summary = analyze_run(expected[run_id]["run"], reference=expected[base_id]["run"]).summary
    want = (
        f"Flux overlap efficiency {_fmt_ratio(summary.flux_overlap_efficiency) or 'not available'}"
    )
    wait_until(page, lambda d: want in text_of(d, "baseline-note"))
    saving = _fmt_ratio(summary.attained_saving) or "not available"
    assert f"attained saving {saving}" in text_of(page, "baseline-note")
    rows = {r["run"]: r for r in table_rows(page, "overview-table")}
    assert rows[run_id]["Flux E vs baseline"] == _fmt_ratio(summary.flux_overlap_efficiency)
    assert rows[run_id]["attained saving vs baseline"] == _fmt_ratio(summary.attained_saving)
    assert rows[base_id]["Flux E vs baseline"] == ""  # the baseline against itself: nothing


def test_breakdown_bars_are_the_analyzer_json(page, expected):
    run_id = page.find_element("id", "run-select").text.strip()
    doc = expected[run_id]["doc"]
    open_tab(page, "Breakdown")
    fig = wait_figure(page, "breakdown-graph", lambda f: trace(f, "idle") is not None)
    rows = sorted(doc["steps"], key=lambda s: (s["rank"], s["step"]))
    assert list(values(trace(fig, "idle")["x"])) == [
        f"rank {r['rank']} · step {r['step']}" for r in rows
    ]
    for name, key in STACK.items():
        np.testing.assert_allclose(
            values(trace(fig, name)["y"]).astype(float), [r[key] for r in rows]
        )
    np.testing.assert_allclose(
        values(trace(fig, "compute (alone)")["y"]).astype(float),
        [r["compute_us"] - r["hidden_comm_us"] for r in rows],
    )
    np.testing.assert_allclose(
        values(trace(fig, "step time")["y"]).astype(float), [r["step_time_us"] for r in rows]
    )
    cp = wait_figure(page, "critical-path-graph")
    if doc["critical_path"]:
        for key in ("compute", "comm", "host", "idle"):
            np.testing.assert_allclose(
                values(trace(cp, key)["y"]).astype(float),
                [c[f"{key}_us"] for c in doc["critical_path"]],
            )
    else:
        assert "not available" in cp["layout"]["meta"]["not_available"]


def _timeline_of_first_step(page, expected):
    """The chosen run's trace tables, analyzer JSON, the step it opens on (the slowest), and the
    Timeline drawn for it."""
    run_id = page.find_element("id", "run-select").text.strip()
    run, doc = expected[run_id]["run"], expected[run_id]["doc"]
    step = slowest_step(doc)
    open_tab(page, "Timeline")
    fig = wait_figure(
        page, "timeline-graph", lambda f: (f["layout"].get("meta") or {}).get("step") == step
    )
    return run, doc, step, fig


def test_timeline_draws_each_class_of_the_step(page, expected):
    run, doc, first_step, fig = _timeline_of_first_step(page, expected)
    counts = _step_window_counts(run, first_step, doc["ranks"])
    for cls, n in counts.items():
        assert _segments(fig, cls) == n, cls
    ticks = fig["layout"]["yaxis"]["ticktext"]
    for r in run.ranks:
        for _device, stream in r.lanes.tolist():  # every stream, named by its role
            (tick,) = [t for t in ticks if t.startswith(f"rank {r.rank} · stream {stream} · ")]
            comm = (r.gpu.cls == ActivityClass.COMM) & (r.lanes[r.gpu.lane][:, 1] == stream)
            assert ("NCCL" in tick) == bool(comm.any()), tick
    labels = set(values(trace(fig, "label names")["text"]))
    assert {"ag_gemm", "gemm_rs"} <= labels  # the instrumentation names of the runtime's ops
    note = text_of(page, "timeline-note")
    assert f"{sum(counts.values()):,} activities" in note
    # the critical path drawn is the analyzer's: its segments add up to the JSON's length
    (cp,) = [c for c in doc["critical_path"] if c["step"] == first_step]
    px = values(trace(fig, "critical path")["x"]).astype(float)
    px = px[~np.isnan(px)]  # (start, end) pairs; NaN only where the path leaves what is drawn
    assert (px[1::2] - px[0::2]).sum() == pytest.approx(cp["length_us"], abs=1e-3)
    # one dotted link per matched collective of the step, and (two ranks) one wait per waiting instance
    mine = [c for c in doc["collectives"] if c["step"] == first_step]
    links = values(trace(fig, "collective links")["x"]).astype(float)
    assert np.isnan(links).sum() + 1 == len(mine)
    waits = values(trace(fig, "comm wait")["x"]).astype(float).reshape(-1, 4)
    assert (waits[:, 2] - waits[:, 0]).sum() == pytest.approx(
        sum(c["wait_us"] for c in mine), abs=1e-3
    )
    assert "Not available" not in note


def test_timeline_hover_names_the_kernel(page, expected):
    run, _doc, _step, fig = _timeline_of_first_step(page, expected)
    comm = next(i for i, t in enumerate(fig["data"]) if t["name"] == "comm")
    start_us = values(fig["data"][comm]["x"]).astype(float)[0]  # the first comm segment's start
    page.execute_script(
        "const gd = document.querySelector('#timeline-graph .js-plotly-plot');"
        "Plotly.Fx.hover(gd, [{curveNumber: arguments[0], pointNumber: 1}]);",
        comm,
    )
    text = wait_until(
        page,
        lambda d: d.execute_script(
            "const h = document.querySelector('#timeline-graph .hoverlayer'); return h && h.textContent"
        ),
    )
    names = {
        r.symbols[i] for r in run.ranks for i in r.gpu.name_id[r.gpu.cls == ActivityClass.COMM]
    }
    assert any(n[:40] in text for n in names), text
    assert f"start {start_us:,.2f} µs" in text, text


def test_timeline_zoom_redraws_the_window(page, expected):
    run, _doc, step, fig = _timeline_of_first_step(page, expected)
    full_total = fig["layout"]["meta"]["total"]
    # the graph's own mount-time relayout (autosize) would supersede the zoom's callback
    time.sleep(1.0)
    fig = None
    for attempt in range(3):  # as a user's drag-zoom; again if a late autosize superseded it
        page.execute_script(
            "Plotly.relayout(document.querySelector('#timeline-graph .js-plotly-plot'),"
            "{'xaxis.range': [100, arguments[0]]});",
            300 + attempt * 1e-3,
        )
        try:
            fig = wait_figure(
                page,
                "timeline-graph",
                lambda f: f["layout"]["meta"]["total"] < full_total,
                timeout=5,
            )
            break
        except TimeoutException:
            continue
    assert fig is not None, "the zoomed window was never redrawn"
    lo = min(int(r.steps.start_ns[r.steps.step == step].min()) for r in run.ranks)
    total = sum(
        int(((r.gpu.start_ns < lo + 300_000) & (r.gpu.end_ns > lo + 100_000)).sum())
        for r in run.ranks
    )
    assert fig["layout"]["meta"]["total"] == total
    assert fig["layout"]["xaxis"]["range"] == pytest.approx([100, 300], abs=0.01)


def test_switching_step_and_rank_updates_figures(page, expected):
    run_id = page.find_element("id", "run-select").text.strip()
    run, doc = expected[run_id]["run"], expected[run_id]["doc"]
    all_steps = sorted({s["step"] for s in doc["steps"]})
    # it opens on the slowest: pick another
    steps = [s for s in all_steps if s != slowest_step(doc)]
    open_tab(page, "Timeline")
    wait_figure(
        page,
        "timeline-graph",
        lambda f: (f["layout"].get("meta") or {}).get("step") == slowest_step(doc),
    )
    choose(page, "step-select", f"step {steps[1]} · ", prefix=True)
    fig = wait_figure(
        page, "timeline-graph", lambda f: (f["layout"].get("meta") or {}).get("step") == steps[1]
    )
    assert _segments(fig, "comm") == _step_window_counts(run, steps[1], doc["ranks"])["comm"]
    toggle(page, "rank-select", "rank 1")
    fig = wait_figure(
        page,
        "timeline-graph",
        lambda f: all(t.startswith("rank 0") for t in f["layout"]["yaxis"]["ticktext"]),
    )
    assert _segments(fig, "compute") == _step_window_counts(run, steps[1], [0])["compute"]
    open_tab(page, "Breakdown")
    only0 = [f"rank 0 · step {s}" for s in all_steps]
    wait_figure(
        page,
        "breakdown-graph",
        lambda f: trace(f, "idle") is not None and list(values(trace(f, "idle")["x"])) == only0,
    )
    toggle(page, "rank-select", "rank 1")
    wait_figure(
        page, "breakdown-graph", lambda f: len(values(trace(f, "idle")["x"])) == 2 * len(all_steps)
    )


def test_switching_run_updates_every_view(page, expected):
    current = page.find_element("id", "run-select").text.strip()
    other = next(k for k in expected if k != current)
    doc = expected[other]["doc"]
    open_tab(page, "Breakdown")
    choose(page, "run-select", other)
    rows = sorted(doc["steps"], key=lambda s: (s["rank"], s["step"]))
    fig = wait_figure(
        page,
        "breakdown-graph",
        lambda f: (
            trace(f, "exposed comm") is not None
            and np.allclose(
                values(trace(f, "exposed comm")["y"]).astype(float),
                [r["exposed_comm_us"] for r in rows],
            )
        ),
    )
    np.testing.assert_allclose(
        values(trace(fig, "idle")["y"]).astype(float), [r["idle_us"] for r in rows]
    )
    open_tab(page, "Timeline")
    first = slowest_step(doc)
    want = _step_window_counts(expected[other]["run"], first, doc["ranks"])
    wait_figure(
        page,
        "timeline-graph",
        lambda f: (
            (f["layout"].get("meta") or {}).get("step") == first
            and all(_segments(f, cls) == n for cls, n in want.items())
        ),
    )


def test_collectives_and_contention_views_show_json_or_say_not_available(page, expected):
    run_id = page.find_element("id", "run-select").text.strip()
    doc = expected[run_id]["doc"]
    step = slowest_step(doc)
    open_tab(page, "Collectives")
    wait_until(page, lambda d: f"Step {step}" in text_of(d, "collectives-note"))
    mine = [c for c in doc["collectives"] if c["step"] == step]
    rows = table_rows(page, "collectives-table")
    if mine:
        assert len(rows) == min(len(mine), 15)  # one page of the table
        if len(mine) <= 15:
            for header, key in (
                ("skew (µs)", "skew_us"),
                ("wait (µs)", "wait_us"),
                ("transfer (µs)", "transfer_us"),
            ):
                shown = sorted(float(r[header].replace(",", "")) for r in rows)
                assert shown == pytest.approx(sorted(c[key] for c in mine), abs=5e-4), header
            assert sorted(r["bytes"] for r in rows) == sorted(size_text(c["bytes"]) for c in mine)
        skew = wait_figure(page, "skew-graph", lambda f: len(f["data"]) > 0)
        got = np.sort(np.concatenate([values(t["y"]).astype(float) for t in skew["data"]]))
        np.testing.assert_allclose(
            got, np.sort([c["skew_us"] for c in mine if c["skew_us"] is not None])
        )
        # two ranks: the later one arrives `skew` after the first, the first at 0
        arrival = wait_figure(page, "arrival-graph", lambda f: len(f["data"]) == len(doc["ranks"]))
        late = np.concatenate([values(t["y"]).astype(float) for t in arrival["data"]])
        np.testing.assert_allclose(
            np.sort(late[late > 0]),
            np.sort([c["skew_us"] for c in mine if c["skew_us"] > 0]),
            atol=1e-3,
        )
    else:
        assert rows == []
        assert "not available" in text_of(page, "collectives-note")
        assert "not available" in wait_figure(page, "skew-graph")["layout"]["meta"]["not_available"]
    open_tab(page, "Contention")
    slowdown = doc["summary"]["contention_slowdown"]
    want = "not available" if slowdown is None else f"{slowdown * 100:.1f}%"
    wait_until(page, lambda d: f"Run contention slowdown: {want}." in text_of(d, "contention-note"))
    coverage = doc["summary"]["contention_coverage"]
    if coverage is not None:
        assert f"It covers {coverage * 100:.1f}% of the overlapped GEMM time" in text_of(
            page, "contention-note"
        )
    gemms = [
        g
        for g in expected[run_id]["analysis"].gemm_contention
        if g.baseline_us is not None and g.overlapped_median_us is not None
    ]
    kernels = [
        k
        for k in expected[run_id]["analysis"].kernel_contention
        if k.isolated_median_us is not None and k.overlapped_median_us is not None
    ]
    fig = wait_figure(page, "contention-graph")
    if gemms:  # GEMMs by shape: alone (the baseline) and beside a transfer
        np.testing.assert_allclose(
            np.sort(values(trace(fig, "isolated (median)")["x"]).astype(float)),
            np.sort([g.baseline_us for g in gemms]),
        )
        np.testing.assert_allclose(
            np.sort(values(trace(fig, "overlapped (median)")["x"]).astype(float)),
            np.sort([g.overlapped_median_us for g in gemms]),
        )
    elif kernels:
        iso = trace(fig, "isolated (median)")
        np.testing.assert_allclose(
            np.sort(values(iso["x"]).astype(float)),
            np.sort([k.isolated_median_us for k in kernels]),
        )
    else:
        assert "not available" in fig["layout"]["meta"]["not_available"]
    tax = wait_figure(page, "tax-graph")
    taxed = [s for s in doc["steps"] if s["contention_tax_us"] is not None]
    if taxed:
        np.testing.assert_allclose(
            np.sort(values(tax["data"][0]["y"]).astype(float)),
            np.sort([s["contention_tax_us"] for s in taxed]),
        )
    else:
        assert "not available" in tax["layout"]["meta"]["not_available"]


def test_hta_view_shows_htas_temporal_breakdown(page, expected):
    run_id = page.find_element("id", "run-select").text.strip()
    frame = expected[run_id]["hta_temporal"]
    open_tab(page, "HTA")
    fig = wait_figure(
        page, "hta-temporal-graph", lambda f: trace(f, "idle") is not None, timeout=60
    )
    np.testing.assert_allclose(
        values(trace(fig, "idle")["y"]).astype(float), frame["idle_time(us)"].to_numpy()
    )
    np.testing.assert_allclose(
        values(trace(fig, "compute")["y"]).astype(float), frame["compute_time(us)"].to_numpy()
    )
    idle = wait_figure(page, "hta-idle-graph", lambda f: len(f["data"]) > 0)
    assert {t["name"] for t in idle["data"]} <= {"host_wait", "kernel_wait", "other"}


def test_a_folder_that_is_not_a_run_shows_an_error_and_the_app_keeps_serving(
    page, expected, not_a_run
):
    open_tab(page, "Breakdown")
    choose(page, "run-select", not_a_run.name)
    wait_until(page, lambda d: "no trace files" in text_of(d, "run-error"))
    fig = wait_figure(
        page, "breakdown-graph", lambda f: "not_available" in (f["layout"].get("meta") or {})
    )
    assert "no trace files" in fig["layout"]["meta"]["not_available"]
    good = sorted(expected)[0]
    choose(page, "run-select", good)
    wait_until(page, lambda d: text_of(d, "run-error") == "")
    rows = sorted(expected[good]["doc"]["steps"], key=lambda s: (s["rank"], s["step"]))
    wait_figure(
        page,
        "breakdown-graph",
        lambda f: (
            trace(f, "idle") is not None
            and np.allclose(
                values(trace(f, "idle")["y"]).astype(float), [r["idle_us"] for r in rows]
            )
        ),
    )


def test_urls_and_inputs_reach_only_the_given_folders(browser, served, expected):
    browser.get(served.url + "?run=../../../../etc/passwd")
    wait_until(browser, lambda d: "unknown run" in text_of(d, "url-error"))
    browser.get(served.url + f"?run={CHUNKED.name}")
    wait_until(browser, lambda d: d.find_element("id", "run-select").text.strip() == CHUNKED.name)
    for path in (
        "assets/../../../../etc/passwd",
        "assets/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "_dash-component-suites/dash/../../../../etc/passwd",
        "_dash-component-suites/dash/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    ):
        r = requests.get(served.url + path, timeout=10)
        assert "root:" not in r.text, path
    for raw in (
        "/../../../../etc/passwd",
        "/assets/../../../../etc/passwd",
        "/..%2f..%2f..%2fetc%2fpasswd",
        f"/_dash-component-suites/../../{CHUNKED.name}/",
    ):
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("GET", raw)  # sent as written: no client-side normalization of ".."
        body = conn.getresponse().read().decode(errors="replace")
        conn.close()
        assert "root:" not in body and "traceEvents" not in body, raw
    store = served.app.server.config["TPSCOPE_STORE"]
    for forged in ("/etc", "../../etc", str(CHUNKED.parent), str(CHUNKED)):
        outs = (
            ("step-select", "options"),
            ("step-select", "value"),
            ("rank-select", "options"),
            ("rank-select", "value"),
            ("baseline-select", "value"),
            ("step-strip", "figure"),
            ("run-warnings", "children"),
            ("run-error", "children"),
        )
        body = {
            "output": ".." + "...".join(f"{i}.{p}" for i, p in outs) + "..",
            "outputs": [{"id": i, "property": p} for i, p in outs],
            "inputs": [{"id": "run-select", "property": "value", "value": forged}],
            "state": [{"id": "want", "property": "data", "value": None}],
            "changedPropIds": ["run-select.value"],
        }
        r = requests.post(served.url + "_dash-update-component", json=body, timeout=10)
        assert r.status_code == 200
        assert "unknown run" in r.json()["response"]["run-error"]["children"]
    assert {k[1] for k in store._memos if k[0] == "run"} <= set(store.run_ids)


def test_a_slow_run_shows_progress_and_the_page_stays_live(browser, tmp_path):
    """A run that takes seconds to read: spinners show at once, tabs still switch, then the figures."""
    import threading

    from tpscope.dashboards.app import create_app

    app = create_app([CHUNKED], use_cache=False)
    store = app.server.config["TPSCOPE_STORE"]
    read = store._load
    let_go = threading.Event()

    def slow_read(*args):
        let_go.wait(60)  # held until the test has looked at the page while the run is being read
        return read(*args)

    store._load = slow_read
    server = Served(app)
    try:
        browser.get(server.url)
        wait_until(
            browser,
            lambda d: d.execute_script(
                "return document.querySelectorAll('.dash-spinner').length > 0"
            ),
            timeout=3,
        )
        open_tab(browser, "Breakdown")  # the page answers while the server reads
        assert (
            browser.execute_script(
                "return document.querySelector('.tab--selected').textContent.trim()"
            )
            == "Breakdown"
        )
        early = figure(browser, "breakdown-graph")
        assert early is None or trace(early, "idle") is None  # still reading: no bars yet
        let_go.set()
        wait_figure(browser, "breakdown-graph", lambda f: trace(f, "idle") is not None, timeout=30)
        wait_until(
            browser,
            lambda d: d.execute_script(
                "return document.querySelectorAll('.dash-spinner').length === 0"
            ),
            timeout=10,
        )
    finally:
        let_go.set()
        browser.get("about:blank")  # the page's requests end before its server does
        server.stop()


def test_a_fused_run_opens_against_its_unfused_run(browser, tmp_path):
    """Copies of the two real runs with manifests of one experiment: choosing the fused run picks
    the unfused one as baseline by itself, and the page shows Flux E against it."""
    import json
    import shutil

    from tpscope.dashboards.app import create_app

    common = {
        "regime": "shm",
        "tp": 2,
        "model": {"layers": 2},
        "dtype": "bfloat16",
        "seq_len": 8192,
        "batch": 1,
    }
    fused, unfused, nvlink = tmp_path / "fused", tmp_path / "unfused", tmp_path / "nvlink"
    for src, dst, extra in (
        (CHUNKED, fused, {"mode": "chunked"}),
        (UNFUSED, unfused, {"mode": "none"}),
        (UNFUSED, nvlink, {"mode": "none", "regime": "nvlink"}),
    ):
        shutil.copytree(src, dst)
        (dst / "tpscope_run.jsonc").write_text(json.dumps({**common, **extra}))
    server = Served(create_app([unfused, fused, nvlink], use_cache=False))
    try:
        browser.get(server.url + "?run=fused")
        wait_until(
            browser, lambda d: "unfused" in d.find_element("id", "baseline-select").text, timeout=60
        )
        summary = analyze_run(load_run(fused), reference=load_run(unfused)).summary
        want = f"fused against baseline unfused: Flux overlap efficiency {_fmt_ratio(summary.flux_overlap_efficiency)}"
        wait_until(browser, lambda d: want in text_of(d, "baseline-note"), timeout=60)
        choose(browser, "baseline-select", "nvlink")  # an unfused run of another regime: no Flux E
        wait_until(
            browser,
            lambda d: "different experiments (regime shm vs nvlink)" in text_of(d, "baseline-note"),
        )
        rows = {r["run"]: r for r in table_rows(browser, "overview-table")}
        assert (
            rows["fused"]["Flux E vs baseline"] == ""
            and rows["fused"]["attained saving vs baseline"] == ""
        )
        choose(browser, "run-select", "unfused")  # the unfused run itself: no baseline
        wait_until(
            browser, lambda d: "pick an unfused run" in d.find_element("id", "baseline-select").text
        )
    finally:
        browser.get("about:blank")  # the page's requests end before its server does
        server.stop()
