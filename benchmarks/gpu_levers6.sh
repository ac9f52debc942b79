#!/usr/bin/env bash
# Issue 5, sixth call (run inline on the warm machine; recorded here as it ran): `auto` probing
# SM margins 0 and 16 (tpscope.fusion.run.auto.AUTO_SM_MARGINS), in shm beside the best fixed mode of
# gpu_levers5.sh and in nvlink beside ring k=2.
export OUT BUDGET_S=330; source benchmarks/gpu_common.sh; S=$OUT/sweeps; mkdir -p $S; W="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1 --no-analyze --auto-cache $S/auto_probe.json"; F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '; (step 160 $TP sweep --nproc 2 --regime shm $W --steps 16 --profile-steps 3 --out $S/shm --variants chunked:4:margin=16,auto; step 160 $TP sweep --nproc 2 --regime nvlink $W --steps 20 --profile-steps 3 --out $S/nvlink --variants ring:2,auto) 2>&1 | grep -Ev "$F" | tee $OUT/log.txt; tar czf $OUT/sweeps.tar.gz -C $S . ; rm -rf $S
