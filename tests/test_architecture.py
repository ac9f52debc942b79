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
