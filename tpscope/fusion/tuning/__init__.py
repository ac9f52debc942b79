"""Tuning the ops alone: `tpscope bench` (`bench_command`, `bench`, the shapes it times `shapes`,
the labels of its variants `labels`) and the timing of regions across ranks that bench and
`auto`'s probe share (`timing`)."""
