"""A built wheel holds the whole product: the dashboard (mapped from dashboards/) and its assets."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_every_package(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("tpscope-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in (
        "tpscope/cli.py",
        "tpscope/trace/read/extract.py",
        "tpscope/metrics/analysis.py",
        "tpscope/report/report_command.py",
        "tpscope/fusion/ops/api.py",
        "tpscope/runfolder/manifest.py",
        "tpscope/calibrate/calibrate_command.py",
        "tpscope/dashboards/app.py",
        "tpscope/dashboards/figures/timeline.py",
        "tpscope/dashboards/assets/style.css",
    ):
        assert module in names, module
    # every module of the source tree, so a new folder cannot be left out of pyproject's packages
    sources = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tpscope").rglob("*.py")
        if "dashboards" not in p.relative_to(ROOT).parts and "__pycache__" not in p.parts
    }
    assert sources - names == set()
