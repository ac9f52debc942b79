"""The whole workflow on a machine without a GPU, as README shows it: `tpscope run --device cpu`,
`analyze` (metrics and a critical path), `dash` (served, a view answering over HTTP) and `report`
against a second CPU run (a verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.dashboards.conftest import free_port
from tests.dashboards.test_every_folder import call
from tests.fusion import _cli as cli
from tests.fusion._cli import TINY_MODEL

REPO = Path(__file__).resolve().parent.parent
SMALL = ["--device", "cpu", "--nproc", "2", "--steps", "4", "--profile-steps", "2", *TINY_MODEL,
         "--timeout-s", "60"]  # fmt: skip
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

pytestmark = pytest.mark.timeout(240)


def tpscope(*args: str) -> subprocess.CompletedProcess:
    return cli.tpscope(*args, timeout=180)


def test_run_analyze_dash_report_on_cpu(tmp_path):
    unfused, chunked = tmp_path / "unfused", tmp_path / "chunked"
    for out, mode in ((unfused, "none"), (chunked, "chunked")):
        done = tpscope("run", "--mode", mode, "--out", str(out), *SMALL)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Warning" not in done.stderr, done.stderr[-2000:]

    done = tpscope("analyze", str(chunked), "--json", "--no-cache")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["cpu_run"] is True and doc["ranks"] == [0, 1]
    assert json.loads((chunked / "tpscope_run.jsonc").read_text())["regime"] == "gloo"
    assert {s["step"] for s in doc["steps"]} == {2, 3}
    for s in doc["steps"]:
        assert s["compute_us"] > 0 and s["comm_us"] > 0 and s["step_time_us"] >= s["compute_us"]
    assert doc["collectives"] and all(c["ranks"] == [0, 1] for c in doc["collectives"])
    assert [p["step"] for p in doc["critical_path"]] == [2, 3]
    assert all(p["length_us"] > 0 for p in doc["critical_path"])
    text = tpscope("analyze", str(chunked), "--no-cache").stdout
    assert "CPU run" in text and f"tpscope dash {chunked}" in text

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpscope.cli",
            "dash",
            str(unfused),
            str(chunked),
            "--port",
            str(port),
            "--no-cache",
        ],
        env=ENV,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(120):
            try:
                if requests.get(url, timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.5)
        layout = requests.get(url + "_dash-layout", timeout=30).text
        assert "chunked" in layout and "unfused" in layout
        run_ids = [o["value"] for o in _find(json.loads(layout), "run-select")["options"]]
        run_id = next(r for r in run_ids if "chunked" in str(r))
        out = call(
            url,
            [("breakdown-graph", "figure"), ("critical-path-graph", "figure")],
            [
                ("run-select", "value", run_id),
                ("rank-select", "value", [0, 1]),
                ("tabs", "value", "breakdown"),
            ],
        )
        bars = out["breakdown-graph"]["figure"]["data"]
        assert bars and any(
            any(v and v > 0 for v in bar.get("y") or bar.get("x") or []) for bar in bars
        )
        assert out["critical-path-graph"]["figure"]["data"]
    finally:
        server.terminate()
        server.wait(timeout=30)

    done = tpscope("report", str(chunked), "--baseline", str(unfused))
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert ("PASS" in done.stdout) == (done.returncode == 0)
    assert "REGRESSION" in done.stdout or "PASS" in done.stdout
    assert done.stdout.count("CPU run") == 2  # baseline and candidate


def _find(node, component_id: str):
    """The props of the component with `component_id` in a Dash layout (JSON)."""
    if isinstance(node, dict):
        props = node.get("props", {})
        if props.get("id") == component_id:
            return props
        for v in list(props.values()) + [node.get("children")]:
            found = _find(v, component_id)
            if found is not None:
                return found
    elif isinstance(node, list):
        for v in node:
            found = _find(v, component_id)
            if found is not None:
                return found
    return None
