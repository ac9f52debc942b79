"""Helpers to drive the Dash page in Chromium and read back what it drew."""

from __future__ import annotations

import base64
import json

import numpy as np
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

TIMEOUT_S = 20


def values(v) -> np.ndarray:
    """A plotly data array as numpy: a plain list, or a typed array {"dtype", "bdata"[, "shape"]}."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if "shape" in v:
            shape = (
                [int(s) for s in str(v["shape"]).split(",")]
                if isinstance(v["shape"], str)
                else v["shape"]
            )
            a = a.reshape(shape)
        return a
    return np.asarray(v if v is not None else [], dtype=object)


def wait_until(browser, predicate, timeout: float = TIMEOUT_S, message: str = ""):
    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(
        lambda d: predicate(d), message
    )


def figure(browser, graph_id: str) -> dict | None:
    """The figure a dcc.Graph holds now ({"data", "layout"}), or None before it is drawn."""
    text = browser.execute_script(
        "const el = document.getElementById(arguments[0]);"
        "const gd = el && el.querySelector('.js-plotly-plot');"
        "if (!gd || !gd.data || !gd.layout) return null;"
        "return JSON.stringify({data: gd.data, layout: gd.layout});",
        graph_id,
    )
    return json.loads(text) if text else None


def trace(fig: dict, name: str) -> dict | None:
    return next((t for t in fig["data"] if t.get("name") == name), None)


def wait_figure(
    browser, graph_id: str, predicate=lambda f: True, timeout: float = TIMEOUT_S
) -> dict:
    """Wait until the graph holds a figure that satisfies `predicate` and no spinner shows."""

    def ready(d):
        f = figure(d, graph_id)
        return f if f is not None and predicate(f) and not loading(d) else False

    return wait_until(browser, ready, timeout, f"{graph_id} never showed the expected figure")


def loading(browser) -> bool:
    return bool(
        browser.execute_script(
            "return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length"
        )
    )


def open_tab(browser, label: str) -> None:
    browser.find_element(
        By.XPATH, f"//*[contains(@class,'tab') and normalize-space()='{label}']"
    ).click()


def choose(browser, dropdown_id: str, label: str, prefix: bool = False) -> None:
    """Pick the option shown as `label` (or, with `prefix`, starting with `label`) in a dcc.Dropdown."""

    def fits(text: str) -> bool:
        return text.startswith(label) if prefix else text == label

    browser.find_element(By.ID, dropdown_id).click()
    option = wait_until(
        browser,
        lambda d: next(
            (
                o
                for o in d.find_elements(By.CSS_SELECTOR, ".dash-dropdown-option")
                if fits(o.text.strip())
            ),
            False,
        ),
    )
    option.click()
    wait_until(browser, lambda d: fits(d.find_element(By.ID, dropdown_id).text.strip()))


def toggle(browser, checklist_id: str, label: str) -> None:
    for option in browser.find_elements(By.CSS_SELECTOR, f"#{checklist_id} label"):
        if option.text.strip() == label:
            option.click()
            return
    raise AssertionError(f"no option {label!r} in #{checklist_id}")


def text_of(browser, element_id: str) -> str:
    return browser.find_element(By.ID, element_id).text


def table_rows(browser, table_id: str) -> list[dict]:
    """A grid's rendered rows, in display order, as {column header: cell text}."""
    return json.loads(
        browser.execute_script(
            "const root = document.getElementById(arguments[0]);"
            "if (!root) return '[]';"
            "const heads = {};"
            "root.querySelectorAll('.ag-header-cell[col-id]').forEach(h => {"
            " const t = h.innerText.trim(); if (t && !(h.getAttribute('col-id') in heads)) heads[h.getAttribute('col-id')] = t; });"
            "const rows = Array.from(root.querySelectorAll('.ag-center-cols-container .ag-row'))"
            " .sort((a, b) => Number(a.getAttribute('row-index')) - Number(b.getAttribute('row-index')));"
            "return JSON.stringify(rows.map(r => { const o = {};"
            " r.querySelectorAll('.ag-cell[col-id]').forEach(c => { o[heads[c.getAttribute('col-id')]] = c.innerText.trim(); });"
            " return o; }));",
            table_id,
        )
    )


def console(browser, expected: tuple[str, ...] = ()) -> list[dict]:
    """The browser's console messages of every level since the last call, less those whose text
    holds one of `expected`."""
    return [e for e in browser.get_log("browser") if not any(x in e["message"] for x in expected)]


def slowest_step(doc: dict) -> int:
    """The step whose slowest rank took longest (from the analyzer JSON's per-rank rows), the
    first profiled step (a warm-up) left out when there are others."""
    worst: dict[int, float] = {}
    steady = [s for s in doc["steps"] if not s.get("first_step")] or doc["steps"]
    for s in steady:
        worst[s["step"]] = max(worst.get(s["step"], 0.0), s["step_time_us"])
    return max(worst, key=worst.get)


def cell(browser, table_id: str, row_id: str, col_id: str):
    """A grid's cell element by row id and column id (to click or hover)."""
    return wait_until(
        browser,
        lambda d: next(
            iter(
                d.find_elements(
                    By.CSS_SELECTOR,
                    f"#{table_id} .ag-row[row-id='{row_id}'] .ag-cell[col-id='{col_id}']",
                )
            ),
            False,
        ),
    )


def overview_ready(browser, n_runs: int) -> bool:
    """The Overview lists `n_runs` runs and none is still being read."""
    rows = table_rows(browser, "overview-table")
    return len(rows) == n_runs and not any(r.get("status") == "reading…" for r in rows)
