#!/usr/bin/env bash
# Issue 5, fifth call (run inline on the warm machine; recorded here as it ran): the SM margin
# curve end to end in shm, chunked k=2 at margins 16, 24 and 32, and k=4 at 16.
export OUT BUDGET_S=300; source benchmarks/gpu_common.sh; S=$OUT/sweeps; mkdir -p $S
step 280 $TP sweep --nproc 2 --regime shm --layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1 --steps 16 --profile-steps 0 --no-analyze --out $S/shm --variants chunked:2:margin=16,chunked:2:margin=24,chunked:2:margin=32,chunked:4:margin=16 2>&1 | grep -v "UserWarning\|return super\|_warn_once\|losses.append\|Consider using\|Warning: \|^step " | tee $OUT/log.txt; tar czf $OUT/sweeps.tar.gz -C $S .
