"""`python -m tpscope.cli` run from the fusion tests: the source tree on PYTHONPATH, the output
captured, and a model small enough that a CPU run takes seconds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TINY_MODEL = (
    "--layers", "1", "--hidden", "32", "--ffn", "64", "--heads", "2", "--vocab", "32",
    "--seq-len", "16", "--batch", "2",
)  # fmt: skip


def tpscope(
    *args: str,
    timeout: float = 150,
    env: dict[str, str] | None = None,
    launcher: list[str] | None = None,
) -> subprocess.CompletedProcess:
    """`python -m tpscope.cli ARGS` (or `launcher + ARGS`) from the repository root, with `env`'s
    variables added to this process's environment."""
    cmd = (launcher or [sys.executable, "-m", "tpscope.cli"]) + list(args)
    return subprocess.run(
        cmd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
