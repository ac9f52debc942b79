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

Importing this package is light on purpose: no torch at import time, so that `tpscope --help`
works without torch. The run folder's format (manifest, regimes, fusion labels) is
tpscope.runfolder's, shared with the analyzer.
"""

from __future__ import annotations
