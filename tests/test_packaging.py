"""A built wheel holds the whole product: the dashboard (mapped from dashboards/) and its assets."""

import json
import os
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
        "tpscope/dashboards/assets/plotly-partial.min.js",
    ):
        assert module in names, module
    # every module of the source tree, so a new folder cannot be left out of pyproject's packages
    sources = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tpscope").rglob("*.py")
        if "dashboards" not in p.relative_to(ROOT).parts and "__pycache__" not in p.parts
    }
    assert sources - names == set()


# Every module of the dashboard, and the command that serves it, imported from the source tree.
_IMPORT_THE_DASHBOARD = """
import importlib, json, pkgutil, sys
import tpscope.cli, tpscope.dashboards
for info in pkgutil.walk_packages(tpscope.dashboards.__path__, "tpscope.dashboards."):
    importlib.import_module(info.name)
for extra in sys.argv[1:]:
    importlib.import_module(extra)
modules = {n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())}
print(json.dumps({"path": list(tpscope.__path__), "modules": modules}))
"""


def _loaded_modules(*extra: str) -> tuple[list[str], dict[str, str]]:
    """`tpscope.__path__`, and {module name: its file}, after importing every dashboard module
    (and `extra`) in a fresh interpreter with the source tree on PYTHONPATH, run from elsewhere."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_THE_DASHBOARD, *extra],
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout)
    return loaded["path"], {n: f for n, f in loaded["modules"].items() if f}


def _files_loaded_twice(modules: dict[str, str]) -> dict[str, list[str]]:
    """{file of this tree: its module names} for files loaded as more than one module."""
    by_file: dict[str, list[str]] = {}
    for name, file in modules.items():
        real = os.path.realpath(file)
        if Path(real).is_relative_to(ROOT.resolve()):
            by_file.setdefault(real, []).append(name)
    return {f: names for f, names in by_file.items() if len(names) > 1}


def test_the_dashboard_is_one_package_of_the_source_tree():
    path, modules = _loaded_modules()
    assert path == [str(ROOT / "tpscope")]  # the package's own folder, nothing appended
    dashboard = {n: f for n, f in modules.items() if n.startswith("tpscope.dashboards")}
    # every file of dashboards/ loaded, each from this tree's dashboards/ folder (not from an
    # installed copy elsewhere)
    files = {p.resolve() for p in (ROOT / "dashboards").rglob("*.py")}
    assert {Path(os.path.realpath(f)) for f in dashboard.values()} == files
    assert not [n for n in modules if n.split(".")[0] == "dashboards"]
    assert _files_loaded_twice(modules) == {}


def test_a_second_spelling_of_the_dashboard_is_seen():
    """The check above can fail: importing the folder under its other name loads its files twice."""
    twice = _files_loaded_twice(_loaded_modules("dashboards.store")[1])
    assert twice == {
        str((ROOT / "dashboards" / "store.py").resolve()): [
            "tpscope.dashboards.store",
            "dashboards.store",
        ],
        str((ROOT / "dashboards" / "__init__.py").resolve()): ["tpscope.dashboards", "dashboards"],
    }
