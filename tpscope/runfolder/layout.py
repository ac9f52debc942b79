"""What a run folder holds and what its files are called (docs/runtime.md, "The run folder").

A run folder is one training run: a trace file per rank (Kineto's `WORKER.TIMESTAMP.pt.trace.json`,
gzipped or not) and the manifest, `tpscope_run.jsonc`. `tpscope run` writes it; `tpscope analyze`,
`report`, `dash` and `calibrate` read it. The manifest's name does not end in `.json`, so tools that
take every `.json` file of a folder for a rank's trace (HTA's `TraceAnalysis(trace_dir=...)`) read
the folder as it is.
"""

from __future__ import annotations

from pathlib import Path

MANIFEST_NAME = "tpscope_run.jsonc"
"""The run's manifest (tpscope.runfolder.manifest): JSON, named so that trace readers skip it."""

OLDER_MANIFEST_NAMES = ("tpscope_run.json",)
"""The manifest's name in folders written by earlier versions of tpscope, still read."""

TRACE_SUFFIXES = (".json", ".json.gz")
"""A file of a run folder with one of these endings, other than the manifest, is a rank's trace."""

RUNTIME_TRACE_PATTERNS = ("*.pt.trace.json", "*.pt.trace.json.gz")
"""The trace files torch.profiler writes for `tpscope run` (replaced with the manifest by --overwrite)."""

RUN_ARTIFACTS = (*RUNTIME_TRACE_PATTERNS, MANIFEST_NAME, *OLDER_MANIFEST_NAMES)
"""What `tpscope run --overwrite` removes from a folder before writing into it; other files stay."""

LOCK_NAME = ".tpscope-run.lock"
"""Held (flock) by the `tpscope run` writing the folder."""


def is_trace_name(name: str) -> bool:
    """Whether a file of a run folder is a rank's trace."""
    return name not in OLDER_MANIFEST_NAMES and name.endswith(TRACE_SUFFIXES)


def manifest_path(folder: str | Path) -> Path:
    """The manifest of `folder`: MANIFEST_NAME, else an older name that exists, else MANIFEST_NAME."""
    folder = Path(folder)
    for name in (MANIFEST_NAME, *OLDER_MANIFEST_NAMES):
        if (folder / name).is_file():
            return folder / name
    return folder / MANIFEST_NAME
