"""Guardrails that cost little: the one-way data flow (import-linter), the linter (ruff check) and the
formatter (ruff format: every file as `ruff format` leaves it)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [["lint-imports"], ["ruff", "check", "."], ["ruff", "format", "--check", "."]],
    ids=["import-linter", "ruff", "ruff-format"],
)
def test_guardrail_passes(command):
    exe = shutil.which(command[0])
    assert exe, f"{command[0]} is installed with the test extras"
    done = subprocess.run(
        [exe, *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _lint_imports_with(tmp_path: Path, module: str, planted: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the source tree where `module` (a path under it) also has the
    line `planted`."""
    tree = tmp_path / "tree"
    tree.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.so")
    for folder in ("tpscope", "dashboards"):
        shutil.copytree(ROOT / folder, tree / folder, symlinks=True, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tree)
    target = tree / module
    target.write_text(target.read_text() + f"\n{planted}\n")
    return subprocess.run(
        [shutil.which("lint-imports"), "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "module, planted, contract",
    [
        (
            "tpscope/report/markdown.py",
            "import tpscope.dashboards.store",
            "The analyzer's stages know nothing of the dashboard",
        ),
        (
            "dashboards/store.py",
            "from tpscope.report import markdown",
            "The dashboard reads through the analyzer, not the report or the runtime",
        ),
        (
            "tpscope/metrics/flux.py",
            "from tpscope.trace import load_run",
            "The Flux formulas, which the runtime reads too, import neither a stage nor a library",
        ),
        (
            "tpscope/metrics/gemm.py",
            "from tpscope.calibrate import store",
            "The analyzer's stages take a calibration as an argument: they never import tpscope calibrate",
        ),
    ],
    ids=[
        "report-imports-dashboard",
        "dashboard-imports-report",
        "flux-imports-trace",
        "metrics-imports-calibrate",
    ],
)
def test_a_planted_import_breaks_its_contract(tmp_path, module, planted, contract):
    done = _lint_imports_with(tmp_path, module, planted)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    text = " ".join(done.stdout.split())  # the report wraps long contract names
    contracts = (ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert f"{contract} BROKEN" in text, done.stdout[-3000:]
    assert f"{contracts - 1} kept, 1 broken" in text, done.stdout[-3000:]


def test_no_private_name_is_imported_across_the_trace_modules():
    """A module of tpscope.trace uses another's public names only (its private ones may change
    with it); the C extension is a module of its own name, imported by its one reader."""
    import ast

    found = []
    for path in sorted((ROOT / "tpscope" / "trace").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tpscope"):
                for alias in node.names:
                    if alias.name.startswith("_") and alias.name != "_event_columns":
                        found.append(f"{path.relative_to(ROOT)}: {node.module}.{alias.name}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                # module._name: a private name reached through an imported module
                value = node.value
                if isinstance(value, ast.Name) and value.id in _TRACE_MODULES:
                    if node.attr != "_event_columns":
                        found.append(f"{path.relative_to(ROOT)}: {value.id}.{node.attr}")
    assert found == []


_TRACE_MODULES = {
    p.stem for p in (ROOT / "tpscope" / "trace").rglob("*.py") if not p.stem.startswith("_")
}
