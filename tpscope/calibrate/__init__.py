"""`tpscope calibrate`: the run's GEMM calls replayed alone on this machine's GPU (metrics.md §8).

It sits outside `tpscope.fusion` (the runtime may not import the analyzer) and outside the
analyzer's stages. Reading a run's GEMM calls goes through `tpscope.trace` and `tpscope.metrics.gemm`;
the replay (`replay.py`, `store.py`) needs only torch, `tpscope.gemm_shapes` and the runtime's SM
margin, so that a GPU machine without the analyzer's libraries (msgspec, dash, plotly, HTA) runs it
from a plan written elsewhere (`--plan-out`, `--plan`).
"""
