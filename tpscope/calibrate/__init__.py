"""`tpscope calibrate`: the run's GEMM calls replayed alone on this machine's GPU (metrics.md §8).

It sits outside `tpscope.fusion` (the runtime may not import the analyzer) and outside the
analyzer's stages: it reads the run's GEMM calls through `tpscope.trace` and `tpscope.metrics.gemm`,
replays them with torch, and leaves its times where `tpscope analyze` finds them
(`tpscope.metrics.calibration`). Nothing on its path imports dash, plotly or HTA.
"""
