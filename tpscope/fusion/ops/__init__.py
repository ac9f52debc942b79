"""The fused ops: `api` (all_gather_matmul, matmul_reduce_scatter and the table from mode to
implementation), one module per mode (`unfused`, `chunked`, `ring`, `symm`, `copy_engine`), what
they share (`common`, `streams`, `schedule`, `resources`, `validate`) and torch's collectives
across versions (`compat`). Needs torch."""
