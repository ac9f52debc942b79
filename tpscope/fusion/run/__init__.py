"""Runs: `tpscope run` (`command`, its config `config`, the fits check `fits`, each rank's
`worker`, `auto`'s probe, the training loop `train`, `optim`, `data`, and rank 0's manifest record
`manifest`) and `tpscope sweep`, runs one change at a time against an unfused one (`sweep_command`)."""
