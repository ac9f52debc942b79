"""Isolated GEMM times measured by `tpscope calibrate` (metrics.md §8): where they are stored and how
they become baseline samples.

A calibration of a run folder is one JSON file in the user's cache folder (beside the analysis
cache, $TPSCOPE_CACHE_DIR else ~/.cache/tpscope), named by the names and sizes of the folder's trace
files, so that it still applies after the folder is copied to another machine; nothing is written
into the run folder or its traces. Each entry is one GEMM call of the run replayed alone at
one SM margin:
`{"op", "dims", "strides", "types", "batch", "m", "k", "n", "dtype", "sm_margin", "times_us": [...]}`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from tpscope.cache import default_cache_dir
from tpscope.errors import UserError
from tpscope.metrics.gemm import GemmShape, Samples
from tpscope.trace.run_folder import find_trace_files

CALIBRATION_VERSION = 1


def calibration_path(run_dir: Path, cache_dir: Path | None = None) -> Path:
    """Where the calibration of `run_dir` lives (whether or not it exists): named by its trace
    files' names and sizes (a folder without readable traces: by its path, and the loader then
    names the problem)."""
    try:
        files = find_trace_files(Path(run_dir))
        text = "\n".join(f"{f.name}:{f.stat().st_size}" for f in files)
    except (UserError, OSError, RuntimeError):  # missing, unreadable, a symlink loop: never an error here
        text = os.path.abspath(run_dir)
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    return Path(cache_dir or default_cache_dir()) / "calibrations" / f"{key}.json"


def write_calibration(path: Path, run_dir: Path, device: str, entries: list[dict]) -> None:
    """Write atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": CALIBRATION_VERSION, "run_dir": str(Path(run_dir).resolve()), "device": device,
           "entries": entries}
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


def read_calibration(path: Path) -> tuple[Samples, str]:
    """(shape, SM margin) -> isolated durations in ns, and the device it was measured on."""
    try:
        doc = json.loads(Path(path).read_text())
        entries = doc["entries"]
        out: dict[tuple[GemmShape, int], list[float]] = {}
        for e in entries:
            shape = GemmShape(int(e["batch"]), int(e["m"]), int(e["k"]), int(e["n"]), str(e["dtype"]))
            out.setdefault((shape, int(e["sm_margin"])), []).extend(float(t) * 1000.0 for t in e["times_us"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a readable tpscope calibration ({exc}); run `tpscope calibrate` again") from None
    return {k: np.array(v) for k, v in out.items()}, str(doc.get("device", "?"))
