"""The instrumented fused tensor-parallel runtime (`tpscope run`, `tpscope bench`).

Importing this package is light on purpose: no torch at import time, so that `tpscope --help`
works without torch. Import the heavy modules directly:

- `tpscope.fusion.ops`: `all_gather_matmul`, `matmul_reduce_scatter` (modes none/chunked/ring/symm_mem/
  copy_engine/host_staged)
- `tpscope.fusion.layers`: column/row-parallel linear layers with sequence parallelism
- `tpscope.fusion.model`: a small tensor-parallel transformer built from them
- `tpscope.fusion.train`: the instrumented training loop that writes a run folder
"""

from __future__ import annotations
