"""Isolated GEMM times measured by `tpscope calibrate` (metrics.md §8): which file belongs to a run
folder, and how its times become baseline samples, which the analysis takes as an argument
(`analyze_run(..., calibration=)`). Files are written by `tpscope.calibrate.store`."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from tpscope.calibrate.store import calibration_file, write_calibration
from tpscope.errors import UserError
from tpscope.metrics.gemm import GemmShape, Samples
from tpscope.trace.run_folder import find_trace_files

__all__ = ["calibration_path", "read_calibration", "run_key", "write_calibration"]


def run_key(run_dir: Path) -> str:
    """A run folder's calibration key: its trace files' names and sizes (a folder without readable
    traces: its path, and the loader then names the problem)."""
    try:
        files = find_trace_files(Path(run_dir))
        text = "\n".join(f"{f.name}:{f.stat().st_size}" for f in files)
    except (
        UserError,
        OSError,
        RuntimeError,
    ):
        # missing, unreadable, a symlink loop: never an error here
        text = os.path.abspath(run_dir)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def calibration_path(run_dir: Path, cache_dir: Path | None = None) -> Path:
    """Where the calibration of `run_dir` lives (whether or not it exists)."""
    return calibration_file(run_key(run_dir), cache_dir)


def read_calibration(path: Path) -> tuple[Samples, str]:
    """(shape, SM margin) -> isolated durations in ns, and the device it was measured on."""
    try:
        doc = json.loads(Path(path).read_text())
        entries = doc["entries"]
        out: dict[tuple[GemmShape, int], list[float]] = {}
        for e in entries:
            shape = GemmShape(
                int(e["batch"]), int(e["m"]), int(e["k"]), int(e["n"]), str(e["dtype"])
            )
            out.setdefault((shape, int(e["sm_margin"])), []).extend(
                float(t) * 1000.0 for t in e["times_us"]
            )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{path}: not a readable tpscope calibration ({exc}); run `tpscope calibrate` again"
        ) from None
    return {k: np.array(v) for k, v in out.items()}, str(doc.get("device", "?"))
