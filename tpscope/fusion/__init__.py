"""The instrumented fused tensor-parallel runtime (`tpscope run`, `bench`, `sweep`), one folder
per job (docs/runtime.md, "Where things live"):

- `ops`: the two fused ops, `all_gather_matmul` and `matmul_reduce_scatter` (`ops.api`), one
  module per mode (none, chunked, ring, symm_mem, copy_engine, host_staged) and the table from
  mode to them; streams, chunk schedules, SM margins.
- `model`: the column/row-parallel layers (autograd) and the small TP transformer.
- `launch`: starting ranks (torchrun, the supervisor), joining the process group, the run
  folder's claim.
- `run`: `tpscope run` (its config, `auto`'s probe, the training loop, the worker, the manifest
  record) and `tpscope sweep`.
- `tuning`: `tpscope bench`, and the timing it shares with `auto`'s probe.

The two ops are this package's public names: `from tpscope.fusion import all_gather_matmul,
matmul_reduce_scatter`. Importing the package is light on purpose: torch loads with the first use
of an op, not before, so that `tpscope --help` works without torch. The run folder's format (manifest, regimes, fusion labels) is
tpscope.runfolder's, shared with the analyzer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter

_WHERE = {
    "all_gather_matmul": "tpscope.fusion.ops.api",
    "matmul_reduce_scatter": "tpscope.fusion.ops.api",
}
__all__ = ["all_gather_matmul", "matmul_reduce_scatter"]


def __getattr__(name: str):
    """The fused ops, imported (with torch) on first use (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
