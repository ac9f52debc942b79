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
