"""What a run folder holds and what its files are called (docs/runtime.md, "The run folder").

A run folder is one training run: a trace file per rank (Kineto's `WORKER.TIMESTAMP.pt.trace.json`,
gzipped or not) and the manifest, `tpscope_run.json`. `tpscope run` writes it; `tpscope analyze`,
`report`, `dash` and `calibrate` read it.
"""

from __future__ import annotations

MANIFEST_NAME = "tpscope_run.json"
"""The run's manifest (tpscope.runfolder.manifest)."""

TRACE_SUFFIXES = (".json", ".json.gz")
"""A file of a run folder with one of these endings, other than the manifest, is a rank's trace."""

RUNTIME_TRACE_PATTERNS = ("*.pt.trace.json", "*.pt.trace.json.gz")
"""The trace files torch.profiler writes for `tpscope run` (replaced with the manifest by --overwrite)."""

RUN_ARTIFACTS = (*RUNTIME_TRACE_PATTERNS, MANIFEST_NAME)
"""What `tpscope run --overwrite` removes from a folder before writing into it; other files stay."""

LOCK_NAME = ".tpscope-run.lock"
"""Held (flock) by the `tpscope run` writing the folder."""


def is_trace_name(name: str) -> bool:
    """Whether a file of a run folder is a rank's trace."""
    return name != MANIFEST_NAME and name.endswith(TRACE_SUFFIXES)
