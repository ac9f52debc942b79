"""Make the README's picture of the dashboard: serve the app, open it in headless Chromium, save a PNG.

    python -m tpscope.dashboards.screenshot [RUN_DIR ...] [--run NAME] [--tab timeline]
                                            [--out docs/images/dashboard.png]

Needs selenium and Debian's `chromium` + `chromium-driver` (nothing is downloaded).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# headless Chromium without its background services (also the browser tests' flags)
HEADLESS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
FLAGS = (*HEADLESS, "--hide-scrollbars", "--force-device-scale-factor=1")
TAB_LABELS = {
    "overview": "Overview",
    "timeline": "Timeline",
    "breakdown": "Breakdown",
    "collectives": "Collectives",
    "contention": "Contention",
    "hta": "HTA",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_drawn(driver, timeout_s: float = 120.0) -> None:
    """Until no callback is loading and every visible graph holds data, for one second in a row."""
    deadline = time.monotonic() + timeout_s
    script = (
        "return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length === 0 && "
        "Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".every(g => g.data && (g.data.length > 0 || (g.layout.annotations || []).length > 0))"
    )
    stable_since = None
    while time.monotonic() < deadline:
        if driver.execute_script(script):
            stable_since = stable_since or time.monotonic()
            if time.monotonic() - stable_since > 1.0:
                return
        else:
            stable_since = None
        time.sleep(0.1)
    raise TimeoutError("the dashboard did not finish drawing")


def take(
    run_dirs: list[Path],
    out: Path,
    run: str | None,
    tab: str,
    width: int,
    height: int,
    zoom_us: tuple[float, float] | None = None,
) -> Path:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from werkzeug.serving import make_server

    from tpscope.dashboards.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = create_app(run_dirs, use_cache=False)
    port = _free_port()
    server = make_server("127.0.0.1", port, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='tpscope-shot-')}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(60)
        url = f"http://127.0.0.1:{port}/" + (f"?run={run}" if run else "")
        driver.get(url)
        _wait_drawn(driver)
        label = TAB_LABELS[tab]
        driver.find_element(
            By.XPATH, f"//*[contains(@class,'tab') and normalize-space()='{label}']"
        ).click()
        _wait_drawn(driver)
        # as if the user had zoomed: the app redraws the window
        if zoom_us is not None and tab == "timeline":
            driver.execute_script(
                "Plotly.relayout(document.querySelector('#timeline-graph .js-plotly-plot'),"
                "{'xaxis.range': [arguments[0], arguments[1]]});",
                *zoom_us,
            )
            time.sleep(0.5)
            _wait_drawn(driver)
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
        server.shutdown()
        thread.join(timeout=10)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tpscope.dashboards.screenshot", description=__doc__.splitlines()[0]
    )
    p.add_argument("run_dirs", nargs="*", help="run folders (default: the bundled sample runs)")
    p.add_argument("--run", help="the run to show (a folder name; default: the first)")
    p.add_argument("--tab", choices=sorted(TAB_LABELS), default="timeline")
    p.add_argument("--out", type=Path, default=Path("docs/images/dashboard.png"))
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=860)
    p.add_argument(
        "--zoom-us",
        metavar="LO,HI",
        help="timeline window in µs since the step start, e.g. 0,30000",
    )
    args = p.parse_args(argv)
    from tpscope.dashboards.dash_command import resolve_run_dirs
    from tpscope.errors import UserError

    try:
        runs = resolve_run_dirs(args.run_dirs)
    except UserError as exc:
        print(f"screenshot: error: {exc}", file=sys.stderr)
        return 2
    zoom = tuple(float(v) for v in args.zoom_us.split(",")) if args.zoom_us else None
    print(take(runs, args.out, args.run, args.tab, args.width, args.height, zoom))
    return 0


if __name__ == "__main__":
    sys.exit(main())
