"""A CPU run (gloo, tests/data/cpu-gloo-tiny) in headless Chromium: the Overview's findings, the
Timeline's lanes named as CPU threads with exposed communication marked, the HTA tab's one line.
Expected values come from the analyzer's JSON and the trace tables, computed here."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.dashboards.browser import figure, open_tab, text_of, trace, wait_until
from tests.dashboards.conftest import Served
from tpscope.metrics import analyze_run, as_json
from tpscope.trace import load_run

CPU_RUN = Path(__file__).resolve().parents[1] / "data" / "cpu-gloo-tiny"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def served_cpu(tmp_path_factory):
    from tpscope.dashboards.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = Served(create_app([CPU_RUN], cache_dir=tmp_path_factory.mktemp("cache")))
    yield server
    server.stop()


def test_a_cpu_run_reads_as_threads_with_its_findings(browser, served_cpu, tmp_path):
    doc = as_json(analyze_run(load_run(CPU_RUN)))
    browser.get(served_cpu.url)
    items = wait_until(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#overview-findings li"), timeout=60
    )
    counted = [s for s in doc["steps"] if not s["first_step"]]
    exposed = sum(s["exposed_comm_us"] for s in counted) / len(counted)
    assert any(f"Exposed communication: {exposed:,.0f} µs per step" in i.text for i in items)
    # what ran is CPU threads' ops: the critical path's host time is said so, and no finding
    # speaks of a GPU, kernels or launches
    paths = [p for p in doc["critical_path"] if not p["first_step"]]
    host_us = sum(p["host_us"] for p in paths) / len(paths)
    texts = [i.text for i in items]
    assert any(f"{host_us:,.0f} µs per step on CPU threads outside their ops" in t for t in texts)
    assert [t for t in texts if re.search(r"GPU|CUDA|kernel|launch", t)] == [], texts
    # the page opens on the slowest step after the warm-up
    steady = {s["step"]: s["step_time_us"] for s in counted if s["rank"] == 0}
    assert f"step {max(steady, key=steady.get)} " in text_of(browser, "step-select") + " "
    browser.save_screenshot(str(tmp_path / "cpu-overview.png"))
    open_tab(browser, "Timeline")
    fig = wait_until(
        browser,
        lambda d: (
            (f := figure(d, "timeline-graph")) and (f["layout"].get("meta") or {}).get("step") and f
        ),
        timeout=60,
    )
    lanes = [str(t) for t in fig["layout"]["yaxis"]["ticktext"]]
    assert lanes and all("stream" not in t and "NCCL" not in t for t in lanes), lanes
    assert any("thread" in t and "collectives" in t for t in lanes), lanes
    assert trace(fig, "exposed comm") is not None
    browser.save_screenshot(str(tmp_path / "cpu-timeline.png"))
    # the Contention tab speaks of CPU ops, not of kernels or a GPU
    open_tab(browser, "Contention")
    wait_until(browser, lambda d: "contention" in text_of(d, "contention-note").lower(), timeout=60)
    wait_until(browser, lambda d: figure(d, "contention-graph") is not None, timeout=60)
    words = browser.execute_script(
        "return Array.from(document.querySelectorAll('#contention-graph text'))"
        ".map(t => t.textContent).join(' ')"
    )
    assert "CPU op" in words and not re.search(r"GPU|CUDA|[Kk]ernel", words), words
    open_tab(browser, "HTA")
    wait_until(browser, lambda d: "not run on a CPU run" in text_of(d, "hta-note"), timeout=60)
    assert text_of(browser, "hta-status") == ""
    # one line says why: no empty figure below it repeats the words
    wait_until(browser, lambda d: not d.find_element(By.ID, "hta-figures").is_displayed())
    shown = browser.find_element(By.TAG_NAME, "body").text
    assert shown.count("not run on a CPU run") == 1, shown
    browser.save_screenshot(str(tmp_path / "cpu-hta.png"))
