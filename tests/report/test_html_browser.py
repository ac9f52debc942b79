"""The HTML report opens in headless Chromium: figures drawn, no console errors, no network."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.report._runs import CHUNKED, SAMPLES, UNFUSED
from tpscope.cli import main
from tpscope.dashboards import screenshot

CHROMIUM, CHROMEDRIVER = Path(screenshot.CHROMIUM), Path(screenshot.CHROMEDRIVER)
FLAGS = screenshot.HEADLESS


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or (str(CHROMIUM) if CHROMIUM.exists() else None)
    driver_path = shutil.which("chromedriver") or (
        str(CHROMEDRIVER) if CHROMEDRIVER.exists() else None
    )
    if not chromium or not driver_path:
        pytest.skip("needs chromium and chromedriver (CI installs Debian's)")
    mp = pytest.MonkeyPatch()
    mp.setenv("SE_OFFLINE", "true")  # Selenium Manager must not download anything
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()
    mp.undo()


def _open(browser, page: Path) -> tuple[list[dict], list[str]]:
    """Load `page`; its console messages and every URL it requested."""
    import json

    browser.get("about:blank")
    browser.get_log("performance"), browser.get_log("browser")  # drain the new-tab page's entries
    browser.get(page.as_uri())
    # let plots draw
    browser.execute_async_script("const done = arguments[0]; setTimeout(done, 300);")
    console = browser.get_log("browser")
    urls = []
    for entry in browser.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return console, urls


SHM_NONE, SHM_CHUNKED = SAMPLES / "h200x2-shm-none", SAMPLES / "h200x2-shm-chunked"
# a real fused/unfused pair with manifests when the sample runs are here (fused is faster: exit 0)
PAIR = (
    (SHM_CHUNKED, SHM_NONE, 0)
    if SHM_NONE.is_dir() and SHM_CHUNKED.is_dir()
    else (CHUNKED, UNFUSED, 1)
)


@pytest.mark.parametrize(
    "candidate, baseline, code", [PAIR, (CHUNKED, None, 0)], ids=["comparison", "one-run"]
)
def test_html_report_opens_without_errors_or_network(browser, tmp_path, candidate, baseline, code):
    out = tmp_path / "r"
    argv = ["report", str(candidate), "--format", "html", "--out", str(out)]
    if baseline is not None:
        argv += ["--baseline", str(baseline)]
    assert main(argv) == code
    page = out / "report.html"
    console, urls = _open(browser, page)
    errors = [m for m in console if m["level"] in ("SEVERE", "ERROR")]
    assert errors == [], errors
    assert urls and all(
        not u.startswith(("http:", "https:", "ws:", "wss:", "ftp:")) for u in urls
    ), urls
    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert [u for u in resources if not u.startswith(("file:", "data:", "blob:"))] == []
    n_plots = browser.execute_script(
        "return document.querySelectorAll('.plotly-graph-div .main-svg').length"
    )
    assert n_plots >= 3  # step time, breakdown, kernels: each draws its SVG layers
    titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('.gtitle')).map(e => e.textContent)"
    )
    assert "Step time per step (slowest rank; x: the first step, left out of the medians)" in titles
    text = browser.find_element("tag name", "body").text
    assert (
        (("REGRESSION" if code else "PASS") in text)
        if baseline is not None
        else ("no verdict" in text)
    )


def test_the_checks_catch_a_console_error_and_a_network_request(browser, tmp_path):
    """The two checks above can fail: a page that throws and fetches from the network is caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
        "<script>undefinedFunction()</script></body></html>"
    )
    console, urls = _open(browser, page)
    assert any(m["level"] == "SEVERE" and "undefinedFunction" in m["message"] for m in console)
    assert "http://127.0.0.1:9/x.png" in urls
