"""Fixtures for the dashboard tests: the real runs, a served app, a headless Chromium."""

from __future__ import annotations

import logging
import shutil
import socket
import threading
from pathlib import Path

import pytest

from tpscope.dashboards.screenshot import CHROMEDRIVER, CHROMIUM, HEADLESS
from tpscope.metrics import analyze_run, as_json
from tpscope.trace import load_run

DATA = Path(__file__).resolve().parent.parent / "data"
CHUNKED = DATA / "h200-shm-chunked4"
UNFUSED = DATA / "h200-nvlink-unfused"
FLAGS = (*HEADLESS, "--window-size=1400,1000")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A Dash app served by werkzeug on 127.0.0.1 in a daemon thread; `stop()` shuts it down."""

    def __init__(self, app) -> None:
        from werkzeug.serving import make_server

        self.app = app
        self.port = free_port()
        self.server = make_server("127.0.0.1", self.port, app.server, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory):
    """A sample_traces folder holding copies of the two real H200 runs (tests/data)."""
    root = tmp_path_factory.mktemp("sample_traces")
    for run in (CHUNKED, UNFUSED):
        shutil.copytree(run, root / run.name)
    return root


@pytest.fixture(scope="module")
def not_a_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("notes") / "not-a-run"
    folder.mkdir()
    (folder / "README.txt").write_text("no traces here\n")
    (folder / "results.csv").write_text("a,b\n1,2\n")
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium for the module (Debian's chromium and chromedriver, never a download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), (
        "needs Debian's chromium and chromium-driver"
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()
    mp.undo()


@pytest.fixture(scope="module")
def expected(sample_root):
    """Per run id: the analyzer JSON, the loaded run, and HTA's temporal breakdown."""
    from hta.trace_analysis import TraceAnalysis

    out = {}
    for folder in (CHUNKED, UNFUSED):
        run = load_run(sample_root / folder.name)
        hta = TraceAnalysis(
            trace_files={r.rank: str(r.path.resolve()) for r in run.ranks},
            include_last_profiler_step=True,
        )
        analysis = analyze_run(run)
        out[folder.name] = {
            "doc": as_json(analysis),
            "analysis": analysis,
            "run": run,
            "hta_temporal": hta.get_temporal_breakdown(visualize=False),
        }
    return out


@pytest.fixture(scope="module")
def served(expected, sample_root, not_a_run, tmp_path_factory):
    """`tpscope dash`'s app over the default input (the sample runs) plus a folder that is no run."""
    from tpscope.dashboards.app import create_app
    from tpscope.dashboards.dash_command import resolve_run_dirs

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    mp = pytest.MonkeyPatch()
    mp.setenv("TPSCOPE_SAMPLE_TRACES", str(sample_root))
    runs = resolve_run_dirs([])
    assert [p.name for p in runs] == sorted([CHUNKED.name, UNFUSED.name])
    app = create_app(runs + [not_a_run], cache_dir=tmp_path_factory.mktemp("cache"))
    server = Served(app)
    yield server
    server.stop()
    mp.undo()
