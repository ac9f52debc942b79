"""Drill-down and the URL (`views.py`, `focus.py`, `assets/views.js`), and the tables' and charts'
defects, in real headless Chromium on (copies of) the real H200 runs.

Which run, step and collective are "worst", and where a collective's kernels lie, is computed
here from the analyzer's JSON and its matching (`tpscope.metrics`), never by the dashboard's code.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.dashboards.browser import (
    cell,
    console,
    open_tab,
    overview_ready,
    slowest_step,
    table_rows,
    text_of,
    trace,
    values,
    wait_figure,
    wait_until,
)
from tests.dashboards.conftest import CHUNKED
from tpscope.gemm_shapes import parse_shape
from tpscope.metrics import analyze_run, as_json
from tpscope.metrics.activities import run_activities
from tpscope.metrics.collectives import match_collectives
from tpscope.metrics.per_activity import activity_detail
from tpscope.trace import ActivityClass, load_run

pytestmark = pytest.mark.timeout(150)


@pytest.fixture(autouse=True)
def no_console_messages(browser):
    browser.get_log("browser")
    yield
    assert console(browser) == []


@pytest.fixture
def page(browser, served):
    browser.get(served.url)
    wait_until(browser, lambda d: overview_ready(d, 3))
    return browser


def _selected_tab(browser) -> str:
    return browser.execute_script(
        "return document.querySelector('.tab--selected').textContent.trim()"
    )


def _timeline(browser, predicate, timeout=30):
    return wait_figure(
        browser,
        "timeline-graph",
        lambda f: bool((f["layout"].get("meta") or {}).get("step")) and predicate(f),
        timeout=timeout,
    )


def _instance_span_us(run, doc, step, key):
    """Start and end (µs on the Timeline's axis) of the kernels of collective `key`, all ranks."""
    acts = run_activities(run)
    match = match_collectives(acts)
    detail = activity_detail(run)
    named = [i for i, k in enumerate(match.key) if k == key]  # one per step: the key holds no step
    rows = np.flatnonzero(np.isin(match.instance, named) & (acts.step == step))
    offsets = {int(k): v for k, v in (doc["clock_offsets_us"] or {}).items()}
    t0 = min(
        int(r.steps.start_ns[r.steps.step == step].min()) - round(offsets.get(r.rank, 0) * 1000)
        for r in run.ranks
    )
    return (
        (detail.start_ns[rows].min() - t0) / 1000.0,
        (detail.end_ns[rows].max() - t0) / 1000.0,
        len(rows),
    )


def _click_strip_bar(browser, index):
    bars = wait_until(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#step-strip .point path") or False
    )
    ActionChains(browser).move_to_element(bars[index]).pause(
        0.3
    ).click().perform()  # as a user: over, then click


def test_from_the_worst_run_to_the_collective_that_exposes_most_and_back_by_url(page, expected):
    # the worst run: the largest exposed-communication share
    worst = max(expected, key=lambda k: expected[k]["doc"]["summary"]["exposed_comm_ratio"])
    run, doc = expected[worst]["run"], expected[worst]["doc"]
    step = slowest_step(doc)
    cell(page, "overview-table", worst, "run").click()
    wait_until(page, lambda d: _selected_tab(d) == "Timeline")
    wait_until(page, lambda d: d.find_element(By.ID, "run-select").text.strip() == worst)
    # its worst step, from the strip
    steps = sorted({s["step"] for s in doc["steps"]})
    _click_strip_bar(page, steps.index(step))
    fig = _timeline(page, lambda f: f["layout"]["meta"]["step"] == step)
    assert "slowest" in page.find_element(By.ID, "step-select").text
    # the collective that exposes the most time in it
    mine = [c for c in doc["collectives"] if c["step"] == step]
    top = max(mine, key=lambda c: c["exposed_us"])
    open_tab(page, "Collectives")
    wait_until(page, lambda d: f"Step {step}" in text_of(d, "collectives-note"))
    # a view of its own in the history
    wait_until(page, lambda d: "tab=collectives" in d.current_url)
    # the table opens on the instances that expose the most, that one first
    rows = wait_until(page, lambda d: table_rows(d, "collectives-table"))
    assert rows[0]["key"] == top["key"], rows[:3]
    cell(page, "collectives-table", top["key"], "key").click()
    wait_until(page, lambda d: _selected_tab(d) == "Timeline")
    fig = _timeline(
        page, lambda f: f["layout"]["meta"].get("selection") == f"collective:{top['key']}"
    )
    lo, hi, n_kernels = _instance_span_us(run, doc, step, top["key"])
    x0, x1 = fig["layout"]["xaxis"]["range"]
    assert x0 <= lo and x1 >= hi, (x0, x1, lo, hi)
    assert x1 - x0 <= 3 * (hi - lo) + 2.0  # zoomed on it, not the whole step
    assert fig["layout"]["meta"]["total"] < sum(
        int(
            (
                (r.gpu.start_ns < r.steps.end_ns[r.steps.step == step].max())
                & (r.gpu.end_ns > r.steps.start_ns[r.steps.step == step].min())
            ).sum()
        )
        for r in run.ranks
    )
    selected = values(trace(fig, "selected")["x"]).astype(float)
    assert np.isnan(selected).sum() == n_kernels  # every rank's kernel of it outlined
    # the URL holds the view: a reload shows the same
    wait_until(page, lambda d: "sel=collective" in d.current_url and "zoom=" in d.current_url)
    url = page.current_url
    page.get(url)
    again = _timeline(
        page, lambda f: f["layout"]["meta"].get("selection") == f"collective:{top['key']}"
    )
    assert _selected_tab(page) == "Timeline"
    assert page.find_element(By.ID, "run-select").text.strip() == worst
    assert again["layout"]["xaxis"]["range"] == pytest.approx([x0, x1], abs=2e-3)
    assert again["layout"]["meta"]["total"] == fig["layout"]["meta"]["total"]
    # back: the view before the collective was clicked (its table, nothing selected), then the
    # Timeline of the whole step before that
    page.back()
    wait_until(page, lambda d: "sel=" not in d.current_url and "zoom=" not in d.current_url)
    wait_until(page, lambda d: _selected_tab(d) == "Collectives")
    assert f"step={step}" in page.current_url and f"run={worst}" in page.current_url
    page.back()
    wait_until(page, lambda d: _selected_tab(d) == "Timeline")
    before = _timeline(page, lambda f: f["layout"]["meta"].get("selection") is None)
    assert before["layout"]["meta"]["step"] == step
    assert before["layout"]["meta"]["total"] > fig["layout"]["meta"]["total"]  # the whole step


def test_a_step_bar_a_breakdown_bar_and_a_contention_bar_open_the_timeline(page, expected):
    run_id = page.find_element(By.ID, "run-select").text.strip()
    doc = expected[run_id]["doc"]
    steps = sorted({s["step"] for s in doc["steps"]})
    other = next(s for s in steps if s != slowest_step(doc))
    _click_strip_bar(page, steps.index(other))
    wait_until(page, lambda d: _selected_tab(d) == "Timeline")
    _timeline(page, lambda f: f["layout"]["meta"]["step"] == other)
    wait_until(page, lambda d: f"step={other}" in d.current_url)
    open_tab(page, "Breakdown")
    wait_figure(page, "breakdown-graph", lambda f: trace(f, "exposed comm") is not None)
    label = f"rank 1 · step {steps[0]}"
    bar = page.execute_script(
        "const gd = document.querySelector('#breakdown-graph .js-plotly-plot');"
        "const i = gd.data.findIndex(t => t.name === 'exposed comm');"
        "const p = Array.from(gd.data[i].x).indexOf(arguments[0]);"
        "return gd.querySelectorAll('.trace.bars')[i].querySelectorAll('.point path')[p];",
        label,
    )
    ActionChains(page).move_to_element(bar).pause(0.3).click().perform()
    fig = _timeline(
        page,
        lambda f: (
            f["layout"]["meta"]["step"] == steps[0]
            and f["layout"]["meta"].get("selection") == "class:comm"
        ),
    )
    comm = [s for s in doc["steps"] if s["step"] == steps[0]]
    assert comm and fig["layout"]["meta"]["selected"] > 0


def test_cell_tooltips_show_and_numbers_sort_and_filter_as_numbers(page, expected):
    run_id = page.find_element(By.ID, "run-select").text.strip()
    doc = expected[run_id]["doc"]
    # a tooltip over a cell (a getter the grid cannot parse shows none and logs a console error)
    ActionChains(page).move_to_element(cell(page, "overview-table", run_id, "run")).perform()
    tip = wait_until(
        page,
        lambda d: d.execute_script(
            "const t = document.querySelector('.ag-tooltip'); return t && t.textContent.trim()"
        ),
    )
    assert tip == run_id
    open_tab(page, "Collectives")
    step = slowest_step(doc)
    wait_until(page, lambda d: f"Step {step}" in text_of(d, "collectives-note"))
    mine = [c for c in doc["collectives"] if c["step"] == step]
    heads = page.execute_script(
        "return Array.from(document.querySelectorAll("
        "'#collectives-table .ag-header-cell-text')).map(h => h.textContent.trim())"
    )
    assert "exposed (µs)" in heads and "alg bw (GB/s)" in heads
    # no raw field names
    assert not [h for h in heads if re.fullmatch(r"[a-z]+(_[a-z]+)+", h)], heads
    # keys sort as a person reads them: /2 before /10
    page.find_element(
        By.CSS_SELECTOR, "#collectives-table .ag-header-cell[col-id='key'] .ag-header-cell-label"
    ).click()

    def natural(key):
        return [int(p) if p.isdigit() else p for p in re.findall(r"\d+|\D+", key)]

    want = sorted((c["key"] for c in mine), key=natural)[:15]
    wait_until(page, lambda d: [r["key"] for r in table_rows(d, "collectives-table")] == want)
    # number filters: ">100" keeps the values above 100, a bare "100" those at or above it
    boxes = page.find_elements(By.CSS_SELECTOR, "#collectives-table .ag-floating-filter input")
    col_ids = page.execute_script(
        "return Array.from(document.querySelectorAll("
        "'#collectives-table .ag-header-row-column .ag-header-cell')).map(h => h.getAttribute('col-id'))"
    )
    box = boxes[col_ids.index("transfer_us")]
    shown_values = sorted(c["transfer_us"] for c in mine)
    top = shown_values[-1]
    cut = round((shown_values[0] + top) / 2)  # a whole number between two values: no exact match
    for text, keep in (
        (f">{cut}", lambda v: v > cut),
        (f"{cut}", lambda v: v >= cut),
        (f"<={cut}", lambda v: v <= cut),
        (f"={top}", lambda v: v == top),
    ):
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(text)
        want = sorted(round(c["transfer_us"], 3) for c in mine if keep(c["transfer_us"]))
        assert 0 < len(want) < len(mine), (text, shown_values)

        def shown(d):
            return sorted(
                float(r["transfer (µs)"].replace(",", ""))
                for r in table_rows(d, "collectives-table")
            )

        wait_until(
            page, lambda d, want=want: shown(d) == pytest.approx(want, abs=5e-4), message=text
        )
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)


def test_pan_or_zoom_button_while_a_zoom_loads_keeps_the_zoom(page, expected):
    run_id = page.find_element(By.ID, "run-select").text.strip()
    run = expected[run_id]["run"]
    open_tab(page, "Timeline")
    time.sleep(1.0)  # the graph's own mount-time relayout (autosize) is over
    meta = _timeline(page, lambda f: True)["layout"]["meta"]
    step, full = meta["step"], meta["total"]
    gd = "const gd = document.querySelector('#timeline-graph .js-plotly-plot');"
    page.execute_script(gd + "Plotly.relayout(gd, {'xaxis.range': [100, 300]});")
    for mode in ("pan", "zoom"):  # the toolbar's Pan, then Zoom, while the zoom's redraw loads
        page.execute_script(gd + "Plotly.relayout(gd, {dragmode: arguments[0]});", mode)
    fig = _timeline(page, lambda f: f["layout"]["meta"]["total"] < full)
    assert fig["layout"]["xaxis"]["range"] == pytest.approx([100, 300], abs=0.01)
    lo = min(int(r.steps.start_ns[r.steps.step == step].min()) for r in run.ranks)
    assert fig["layout"]["meta"]["total"] == sum(
        int(((r.gpu.start_ns < lo + 300_000) & (r.gpu.end_ns > lo + 100_000)).sum())
        for r in run.ranks
    )
    wait_until(page, lambda d: "zoom=100,300" in unquote(d.current_url))


def test_no_button_offers_to_upload_a_chart(page):
    wait_figure(page, "overview-graph", lambda f: len(f["data"]) > 0)
    titles = page.execute_script(
        "return Array.from(document.querySelectorAll('.modebar-btn'))"
        ".map(b => b.getAttribute('data-title') || '')"
    )
    assert titles, "no toolbar drawn"
    assert not [t for t in titles if re.search(r"cloud|chart studio|share|edit in", t, re.I)], (
        titles
    )


def test_unknown_url_values_say_so_in_one_line(browser, served):
    browser.get(served.url + "?run=h200-shm-chunked4&tab=nowhere")
    wait_until(browser, lambda d: "tab='nowhere'" in text_of(d, "url-error"))
    assert "tab=nowhere" in browser.current_url  # a link that fails is left as given, to correct


def test_search_outlines_what_it_names_and_cpu_threads_show_on_demand(page, expected):
    run_id = page.find_element(By.ID, "run-select").text.strip()
    run, doc = expected[run_id]["run"], expected[run_id]["doc"]
    step = slowest_step(doc)
    open_tab(page, "Timeline")
    _timeline(page, lambda f: f["layout"]["meta"]["step"] == step)
    box = page.find_element(By.ID, "timeline-search")
    box.send_keys("nccl", Keys.ENTER)
    fig = _timeline(page, lambda f: f["layout"]["meta"].get("selection") == "search:nccl")
    off = {
        r.rank: round((doc["clock_offsets_us"] or {}).get(str(r.rank), 0) * 1000) for r in run.ranks
    }
    # the view: the step on all ranks
    t0 = min(r.steps.start_ns[r.steps.step == step].min() - off[r.rank] for r in run.ranks)
    t1 = max(r.steps.end_ns[r.steps.step == step].max() - off[r.rank] for r in run.ranks)
    want = 0
    for r in run.ranks:  # the activities in view whose name holds the text
        named = np.array(["nccl" in s.lower() for s in r.symbols])[r.gpu.name_id]
        want += int(
            (named & (r.gpu.start_ns - off[r.rank] < t1) & (r.gpu.end_ns - off[r.rank] > t0)).sum()
        )
    assert fig["layout"]["meta"]["selected"] == want > 0
    wait_until(
        page, lambda d: "sel=search%3Anccl" in d.current_url or "sel=search:nccl" in d.current_url
    )
    page.find_element(
        By.XPATH, "//*[@id='timeline-options']//label[normalize-space()='CPU threads']"
    ).click()
    fig = _timeline(page, lambda f: trace(f, "CPU ops") is not None)
    ticks = fig["layout"]["yaxis"]["ticktext"]
    in_view = {
        r.rank: (r.gpu.launch_start_ns >= 0)
        & (r.gpu.start_ns - off[r.rank] < t1)
        & (r.gpu.end_ns - off[r.rank] > t0)
        for r in run.ranks
    }
    threads = [
        f"rank {r.rank} · CPU thread {t}"
        for r in run.ranks
        for t in np.unique(r.gpu.launch_tid[in_view[r.rank]])
    ]
    assert [
        t for t in ticks if " · CPU thread " in t
    ] == threads  # one row per thread that launched in view
    launched = sum(int(m.sum()) for m in in_view.values())
    assert int(np.isnan(values(trace(fig, "CPU ops")["x"]).astype(float)).sum()) > 0
    arrows = values(trace(fig, "launch arrows")["x"]).astype(float).reshape(-1, 3)
    # launch before the kernel
    assert len(arrows) == launched and (arrows[:, 1] >= arrows[:, 0] - 1e-3).all()


def test_open_in_perfetto_gives_the_step_as_a_trace(page, served, expected):
    import base64
    import io
    import json
    import zipfile

    import requests

    run_id = page.find_element(By.ID, "run-select").text.strip()
    run, doc = expected[run_id]["run"], expected[run_id]["doc"]
    step = slowest_step(doc)
    body = {
        "outputs": [
            {"id": "perfetto-download", "property": "data"},
            {"id": "timeline-note", "property": "children"},
        ],
        "inputs": [{"id": "perfetto-button", "property": "n_clicks", "value": 1}],
        "state": [
            {"id": "run-select", "property": "value", "value": run_id},
            {"id": "step-select", "property": "value", "value": step},
            {"id": "rank-select", "property": "value", "value": [0]},
        ],
        "changedPropIds": ["perfetto-button.n_clicks"],
    }
    open_tab(page, "Timeline")
    # the button is on the page; its callback, as it calls it:
    page.find_element(By.ID, "perfetto-button")
    body["output"] = next(
        k for k in served.app.callback_map if k.startswith("..perfetto-download.data")
    )
    r = requests.post(served.url + "_dash-update-component", json=body, timeout=30)
    assert r.status_code == 200, r.text[:300]
    out = r.json()["response"]
    data = out["perfetto-download"]["data"]
    assert data["filename"] == f"{run_id}-export-step-{step}.zip" and data["base64"]
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(data["content"]))) as z:
        (name,) = z.namelist()  # rank 0 only, in the folder `tpscope export` writes
        assert name.startswith(f"{run_id}-export-step-{step}/rank0.")
        trace = json.loads(z.read(name))
    assert trace["distributedInfo"]["rank"] == 0
    (r0,) = [x for x in run.ranks if x.rank == 0]
    m = r0.steps.step == step
    lo, hi = r0.steps.start_ns[m].min(), r0.steps.end_ns[m].max()
    kernels = [
        e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    assert len(kernels) == int(((r0.gpu.start_ns < hi) & (r0.gpu.end_ns > lo)).sum())
    assert {e["pid"] for e in kernels} == {0}
    assert "ui.perfetto.dev" in out["timeline-note"]["children"]


def test_the_overview_shows_each_run_as_it_arrives(browser, expected, sample_root):
    """One run is held back while being read: the other shows, the held one says it is being
    read, then shows its numbers once let go."""
    import threading

    from tests.dashboards.conftest import CHUNKED, UNFUSED, Served
    from tpscope.dashboards.app import create_app

    app = create_app([sample_root / UNFUSED.name, sample_root / CHUNKED.name], use_cache=False)
    store = app.server.config["TPSCOPE_STORE"]
    read = store._load
    let_go = threading.Event()

    def slow_read(entry, version):
        if entry.run_id == CHUNKED.name:
            let_go.wait(60)
        return read(entry, version)

    store._load = slow_read
    server = Served(app)
    try:
        browser.get(server.url)
        fast = expected[UNFUSED.name]["doc"]["summary"]["step_time_us"]
        wait_until(
            browser,
            lambda d: (
                {r["run"]: r for r in table_rows(d, "overview-table")}.get(UNFUSED.name, {}).get(
                    "step time (µs)"
                )
                == f"{fast:,.1f}"
            ),
            timeout=30,
        )
        rows = {r["run"]: r for r in table_rows(browser, "overview-table")}
        assert (
            rows[CHUNKED.name]["status"] == "reading…"
            and rows[CHUNKED.name]["step time (µs)"] == ""
        )
        let_go.set()
        slow = expected[CHUNKED.name]["doc"]["summary"]["step_time_us"]
        wait_until(
            browser,
            lambda d: (
                {r["run"]: r for r in table_rows(d, "overview-table")}[CHUNKED.name][
                    "step time (µs)"
                ]
                == f"{slow:,.1f}"
            ),
            timeout=30,
        )
    finally:
        let_go.set()
        browser.get("about:blank")
        server.stop()


def test_a_contention_bar_outlines_its_kernels_on_the_timeline(page, expected):
    """The run has GEMM shapes, so the tab draws them: a click on a shape's bar outlines every GEMM of
    that shape in the step, counted here row by row from the raw tables."""
    run_id = CHUNKED.name  # its GEMMs run both alone and beside communication
    page.get(page.current_url.split("?")[0] + f"?run={run_id}")
    wait_until(page, lambda d: d.find_element(By.ID, "run-select").text.strip() == run_id)
    run, doc = expected[run_id]["run"], expected[run_id]["doc"]
    # the shapes above the floor the tab states: 10 GEMMs alone and 10 beside a transfer, medians
    # 2 µs apart; the most tax first
    gemms = sorted(
        (
            g
            for g in expected[run_id]["analysis"].gemm_contention
            if g.baseline_us is not None
            and g.overlapped_median_us is not None
            and min(g.n_isolated, g.n_overlapped) >= 10
            and abs(g.overlapped_median_us - g.baseline_us) >= 2
        ),
        key=lambda g: -g.tax_us_per_step,
    )
    assert gemms  # the sample run has GEMM shapes both alone and beside a transfer
    open_tab(page, "Contention")
    fig = wait_figure(page, "contention-graph", lambda f: trace(f, "isolated (median)") is not None)
    assert "GEMM" in fig["layout"]["title"]["text"]
    shape = values(trace(fig, "isolated (median)")["customdata"])[0][-1]
    assert shape == gemms[0].shape  # the first bar: the most taxed shape
    bar = page.execute_script(
        "const gd = document.querySelector('#contention-graph .js-plotly-plot');"
        "return gd.querySelectorAll('.trace.bars')[0].querySelectorAll('.point path')[0];"
    )
    ActionChains(page).move_to_element(bar).pause(0.3).click().perform()
    wait_until(page, lambda d: _selected_tab(d) == "Timeline")
    step = slowest_step(doc)
    got = _timeline(page, lambda f: f["layout"]["meta"].get("selection") == f"gemm:{shape}")
    off = {
        r.rank: round((doc["clock_offsets_us"] or {}).get(str(r.rank), 0) * 1000) for r in run.ranks
    }
    t0 = min(r.steps.start_ns[r.steps.step == step].min() - off[r.rank] for r in run.ranks)
    t1 = max(r.steps.end_ns[r.steps.step == step].max() - off[r.rank] for r in run.ranks)
    want = 0
    for r in run.ranks:
        g, sym = r.gpu, r.symbols
        for i in np.flatnonzero(
            (g.start_ns - off[r.rank] < t1) & (g.end_ns - off[r.rank] > t0)
        ).tolist():
            if g.cls[i] != ActivityClass.COMPUTE or g.op_name_id[i] < 0 or g.dims_id[i] < 0:
                continue
            found = parse_shape(
                sym[g.op_name_id[i]],
                sym[g.dims_id[i]],
                sym[g.types_id[i]] if g.types_id[i] >= 0 else "",
            )
            want += found is not None and found.label == shape
    assert got["layout"]["meta"]["selected"] == want > 0
    wait_until(page, lambda d: "sel=gemm" in d.current_url)  # a link to it outlines the same GEMMs
    page.get(page.current_url)
    again = _timeline(page, lambda f: f["layout"]["meta"].get("selection") == f"gemm:{shape}")
    assert again["layout"]["meta"]["selected"] == want


SAMPLE_RUN = Path(__file__).resolve().parents[2] / "sample_traces" / "h200x2-shm-chunked"


@pytest.fixture(scope="module")
def served_sample(tmp_path_factory):
    """The bundled sample run, whose findings include a taxed GEMM shape, host-bound time and the
    headroom."""
    from tests.dashboards.conftest import Served
    from tpscope.dashboards.app import create_app

    server = Served(create_app([SAMPLE_RUN], cache_dir=tmp_path_factory.mktemp("cache")))
    yield server
    server.stop()


def _finding(browser, prefix: str):
    return wait_until(
        browser,
        lambda d: next(
            (
                b
                for b in d.find_elements(By.CSS_SELECTOR, "#overview-findings li button")
                if b.text.startswith(prefix)
            ),
            False,
        ),
        timeout=60,
    )


def test_a_gemm_a_host_and_the_headroom_finding_each_open_what_they_name(browser, served_sample):
    """One click from each finding to what it names: every GEMM of the taxed shape outlined in the
    step on view, the CPU threads' lanes shown for host-bound time, the headroom's replay on the
    What-if tab."""
    doc = as_json(analyze_run(load_run(SAMPLE_RUN)))
    step = slowest_step(doc)
    top = max(doc["gemm_contention"], key=lambda g: g["tax_us_per_step"])
    browser.get(served_sample.url)
    link = _finding(browser, f"GEMM {top['shape']} taxed")
    link.click()
    fig = _timeline(
        browser, lambda f: f["layout"]["meta"].get("selection") == f"gemm:{top['shape']}"
    )
    assert fig["layout"]["meta"]["step"] == step
    assert fig["layout"]["meta"]["selected"] > 0  # its GEMMs outlined, not an empty selection
    browser.get(served_sample.url)
    link = _finding(browser, "Host-bound")
    op = link.find_element(By.XPATH, "..").text.split("most in ")[1].split(" ")[0]
    link.click()
    fig = _timeline(browser, lambda f: f["layout"]["meta"].get("selection") == f"search:{op}")
    # the CPU threads' lanes shown, where the host time is spent, and the path's time in it
    # outlined there (a runtime call or a nested op, which no drawn activity is named by)
    assert browser.find_element(By.CSS_SELECTOR, "#timeline-options input").is_selected()
    fig = _timeline(browser, lambda f: f["layout"]["meta"].get("selected", 0) > 0)
    assert fig["layout"]["meta"]["selection"] == f"search:{op}"
    browser.get(served_sample.url)
    _finding(browser, "Headroom").click()
    wait_until(browser, lambda d: _selected_tab(d) == "What-if", timeout=30)
