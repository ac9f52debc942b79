"""How long the dashboard takes on a run, in headless Chromium: the first view from a cold cache and
a zoom's redraw of the Timeline, with where the first view's time goes.

    python3 benchmarks/dashboard_speed.py [RUN_DIR] [--repeat 3] [--out timing.json]

RUN_DIR defaults to the sample run `sample_traces/DEFAULT` names. Each repeat builds a fresh app
over an empty cache folder (a cold start: the run is read and analyzed again) and opens a fresh
page. Measured:

- first view: from the page's request to the Overview's findings and bars drawn;
- per callback on the server: wall time of each `/_dash-update-component` request, named by its
  outputs, and how many were made before the first view;
- in the browser: `performance` resource timings (bytes on the wire and decoded, per file);
- with `--js-profile`: the browser's main-thread JavaScript time up to the first view, per file
  (Chromium's sampling profiler, self time);
- zoom redraw: a `Plotly.relayout` of the Timeline to a window until the figure drawn for that
  window is on the page (three windows).

The load average (`/proc/loadavg`) is kept before and after: on a shared machine it says what else
ran. Needs selenium and Debian's `chromium` + `chromium-driver`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WINDOWS_US = ((100.0, 3000.0), (5000.0, 9000.0), (200.0, 700.0))


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def _timed_requests(server) -> list[dict]:
    """Wrap the Flask app so that every callback request's outputs and wall time are kept."""
    from flask import g, request

    log: list[dict] = []

    @server.before_request
    def _start():
        g.t0 = time.perf_counter()

    @server.after_request
    def _end(response):
        if request.path.endswith("_dash-update-component"):
            body = request.get_json(silent=True) or {}
            log.append(
                {
                    "output": str(body.get("output", ""))[:80],
                    "t_end": time.perf_counter(),
                    "s": round(time.perf_counter() - g.t0, 3),
                    "bytes": response.calculate_content_length() or 0,
                }
            )
        return response

    return log


def _figure_meta(driver) -> dict:
    text = driver.execute_script(
        "const gd = document.querySelector('#timeline-graph .js-plotly-plot');"
        "return gd && gd.layout ? JSON.stringify({meta: gd.layout.meta || {},"
        " rev: gd.layout.uirevision || ''}) : null;"
    )
    return json.loads(text) if text else {}


def _window(driver):
    tail = str(_figure_meta(driver).get("rev", "")).rsplit("|", 1)[-1].strip("()")
    try:
        lo, hi = (float(x) for x in tail.split(","))
    except ValueError:
        return None
    return lo, hi


def _until(driver, predicate, timeout_s: float = 120.0) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout_s, poll_frequency=0.05).until(lambda d: predicate(d))


def _overview_drawn(driver) -> bool:
    return bool(
        driver.execute_script(
            "const li = document.querySelector('#overview-findings li');"
            "const gd = document.querySelector('#overview-graph .js-plotly-plot');"
            "return !!(li && gd && gd.data && gd.data.length);"
        )
    )


def _js_seconds_by_file(profile: dict) -> dict[str, float]:
    """Self time per script file (or per V8 category: program, idle, garbage collector)."""
    nodes = {n["id"]: n["callFrame"] for n in profile["nodes"]}
    total_s = (profile["endTime"] - profile["startTime"]) / 1e6
    per_sample_s = total_s / max(len(profile["samples"]), 1)
    out: dict[str, float] = {}
    for node in profile["samples"]:
        frame = nodes[node]
        name = frame["url"].split("?")[0].rsplit("/", 1)[-1] or frame["functionName"]
        out[name] = out.get(name, 0.0) + per_sample_s
    return {k: round(v, 3) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v >= 0.01}


def measure_once(run_dir: Path, driver, zoom: bool, js_profile: bool = False) -> dict:
    from werkzeug.serving import make_server

    from tpscope.dashboards.dash_command import build_app

    with tempfile.TemporaryDirectory() as cache:
        t_app = time.perf_counter()
        app, _ = build_app([str(run_dir)], cache_dir=cache)  # as `tpscope dash RUN` builds it
        log = _timed_requests(app.server)
        server = make_server("127.0.0.1", 0, app.server, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.server_port}/"
        try:
            load_before = _load()
            if js_profile:
                driver.execute_cdp_cmd("Profiler.enable", {})
                driver.execute_cdp_cmd("Profiler.start", {})
            t0 = time.perf_counter()
            driver.get(url)
            _until(driver, _overview_drawn)
            first_view_s = time.perf_counter() - t0
            js = (
                _js_seconds_by_file(driver.execute_cdp_cmd("Profiler.stop", {})["profile"])
                if js_profile
                else None
            )
            calls = [dict(c, t_end=round(c["t_end"] - t0, 3)) for c in log]
            resources = driver.execute_script(
                "return performance.getEntriesByType('resource').map(e => ({name: e.name,"
                " ms: Math.round(e.duration), wire: e.transferSize, body: e.decodedBodySize}));"
            )
            nav = driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return {dom_content_loaded_ms: Math.round(n.domContentLoadedEventEnd),"
                " load_ms: Math.round(n.loadEventEnd)};"
            )
            redraws = []
            if zoom:
                driver.execute_script(
                    "Array.from(document.querySelectorAll('.tab'))"
                    ".find(t => t.textContent.trim() === 'Timeline').click();"
                )
                _until(driver, lambda d: _figure_meta(d).get("meta", {}).get("step"))
                time.sleep(1.0)  # the graph's own mount-time relayout is over
                for lo, hi in WINDOWS_US:
                    t1 = time.perf_counter()
                    driver.execute_script(
                        "const gd = document.querySelector('#timeline-graph .js-plotly-plot');"
                        "Plotly.relayout(gd, {'xaxis.range': [arguments[0], arguments[1]]});",
                        lo,
                        hi,
                    )
                    _until(driver, lambda d, w=(lo, hi): _window(d) == w, 60.0)
                    redraws.append(round(time.perf_counter() - t1, 3))
            return {
                "app_build_s": round(t0 - t_app, 3),
                "first_view_s": round(first_view_s, 3),
                "navigation": nav,
                "callbacks_before_first_view": [c for c in calls if c["t_end"] <= first_view_s],
                "resources": [
                    dict(r, name=r["name"].split("?")[0].rsplit("/", 1)[-1]) for r in resources
                ],
                "wire_bytes": sum(r["wire"] or 0 for r in resources),
                "js_s_by_file": js,
                "zoom_redraw_s": redraws,
                "load_avg_before": load_before,
                "load_avg_after": _load(),
            }
        finally:
            server.shutdown()
            thread.join(timeout=10)


def _driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from tpscope.dashboards.screenshot import CHROMEDRIVER, CHROMIUM, HEADLESS

    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*HEADLESS, "--window-size=1400,1000"):
        options.add_argument(flag)
    # no disk cache: every page load fetches the bundles again, as a first visit does
    options.add_argument("--disk-cache-size=1")
    options.add_argument("--disable-application-cache")
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--js-profile", action="store_true", help="profile the page's JavaScript")
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from tpscope.samples import default_run

    run_dir = args.run_dir or default_run()
    runs = []
    for _ in range(args.repeat):
        driver = _driver()  # a fresh browser: nothing cached from the last repeat
        try:
            runs.append(measure_once(run_dir, driver, zoom=True, js_profile=args.js_profile))
        finally:
            driver.quit()
    import dash
    import plotly
    import torch

    result = {
        "command": "python3 benchmarks/dashboard_speed.py " + " ".join(sys.argv[1:]),
        "run": Path(run_dir).name,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": {
            "python": platform.python_version(),
            "dash": dash.__version__,
            "plotly": plotly.__version__,
            "torch": torch.__version__,
        },
        "first_view_s_median": statistics.median(r["first_view_s"] for r in runs),
        "zoom_redraw_s_median": statistics.median(x for r in runs for x in r["zoom_redraw_s"]),
        "targets_s": {"first_view": 3.0, "zoom_redraw": 1.0},
        "runs": runs,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    for r in runs:
        print(
            f"first view {r['first_view_s']:.2f} s (app {r['app_build_s']:.2f} s, "
            f"{len(r['callbacks_before_first_view'])} callbacks, {r['wire_bytes'] / 1e6:.2f} MB "
            f"on the wire), zoom redraws {r['zoom_redraw_s']} s, load {r['load_avg_before']}"
        )
        if r["js_s_by_file"]:
            print("  JavaScript s by file:", list(r["js_s_by_file"].items())[:8])
    print(
        f"median: first view {result['first_view_s_median']:.2f} s, "
        f"zoom redraw {result['zoom_redraw_s_median']:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
