"""Starting and joining ranks: torchrun on one node or the user's (`torchrun`, `supervisor`,
`lifetime`), the process group and the regime each rank joins with (`process`), and the run
folder a run holds (`out_dir`). Torch is imported by `process` only."""
