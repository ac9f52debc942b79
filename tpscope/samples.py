"""The bundled sample runs (`sample_traces/`): real run folders from the GPU machine.

`sample_traces/DEFAULT` names the folder that commands read when given none.
"""

from __future__ import annotations

import os
from pathlib import Path

from tpscope.errors import UserError

ENV_VAR = "TPSCOPE_SAMPLE_TRACES"


def sample_root() -> Path | None:
    """The sample_traces folder: $TPSCOPE_SAMPLE_TRACES, the source checkout's, or ./sample_traces."""
    candidates = []
    if os.environ.get(ENV_VAR):
        candidates.append(Path(os.environ[ENV_VAR]))
    candidates.append(Path(__file__).resolve().parent.parent / "sample_traces")
    candidates.append(Path.cwd() / "sample_traces")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def sample_runs() -> list[Path]:
    """Every bundled run folder, sorted by name."""
    root = sample_root()
    if root is None:
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def default_run() -> Path:
    """The run a command reads when given no folder; a clear error when none is bundled."""
    root = sample_root()
    runs = sample_runs()
    if root is None or not runs:
        raise UserError(
            "no run folder given and no bundled sample run found; "
            "pass a folder of torch.profiler traces, e.g. `tpscope analyze path/to/run`"
        )
    marker = root / "DEFAULT"
    if marker.is_file():
        name = marker.read_text().strip()
        if (root / name).is_dir():
            return root / name
    return runs[0]
