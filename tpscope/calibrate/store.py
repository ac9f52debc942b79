"""Where calibrations live and how one is written (metrics.md §8, "Calibration"): standard library
only, so that the replay on a GPU machine without the analyzer's libraries can write one.

A calibration is one JSON file in the user's cache folder, beside the analysis cache
($TPSCOPE_CACHE_DIR, else ~/.cache/tpscope): `calibrations/<key>.json`, the key naming the run by its
trace files' names and sizes (`tpscope.calibrate.read.run_key`). Each entry is one GEMM call of
the run replayed alone at one SM margin:
`{"op", "dims", "strides", "types", "batch", "m", "k", "n", "dtype", "sm_margin", "times_us": [...]}`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from tpscope.cache import default_cache_dir

CALIBRATION_VERSION = 1
PLAN_VERSION = 1


# a key is a file name in the cache, never a path: `run_key` writes 32 hex digits
KEY_FORM = re.compile(r"[0-9a-f]{32}")


def is_key(key: object) -> bool:
    return isinstance(key, str) and KEY_FORM.fullmatch(key) is not None


def calibration_file(key: str, cache_dir: Path | None = None) -> Path:
    if not is_key(key):  # a plan from elsewhere never names a file outside the cache
        raise ValueError(f"calibration key {key!r:.80} is not 32 hex digits")
    return Path(cache_dir or default_cache_dir()) / "calibrations" / f"{key}.json"


def write_json(path: Path, doc: dict) -> None:
    """Atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep a plan from others
    os.replace(tmp, path)


def write_calibration(path: Path, run_dir: str | Path, device: str, entries: list[dict]) -> None:
    write_json(
        Path(path),
        {
            "version": CALIBRATION_VERSION,
            "run_dir": str(run_dir),
            "device": device,
            "entries": entries,
        },
    )
