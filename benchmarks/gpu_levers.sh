#!/usr/bin/env bash
# Issue 5, resource levers: SM margin of the GEMMs beside a transfer, CTA cap of the fused ops'
# NCCL communicator, backward weight-gradient overlap, fused AdamW. The bench times every lever
# side by side per regime (with the GEMM alone and beside the collective at each margin); the
# sweeps measure them end to end on the reference model. Output in $OUT: bench-*.json,
# sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-560}
source "$(dirname "$0")/gpu_common.sh"
MODEL="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1 --steps 12 --profile-steps 2"
S="$OUT/sweeps"; mkdir -p "$S"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
step 40 $TP bench --regime shm --shape 2048,2048,4096 --modes chunked --chunks 2 --sm-margins 0,8 --comm-ctas 0,4 --reps 3 --warmup 1
step 110 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 1,2,4,8 --ring-chunks 1,2,4 \
  --sm-margins 0,4,8,16 --comm-ctas 0,2 --reps 20 --warmup 5 --json "$OUT/bench-shm.json"
step 200 $TP sweep --nproc 2 --regime shm $MODEL --no-analyze --out "$S/shm" \
  --variants chunked:8:bwd=off,chunked:8,chunked:8:margin=8,chunked:4:margin=8,chunked:2:margin=8
step 100 $TP bench --regime nvlink --shape ref --shape 8b --modes chunked,ring,symm_mem --chunks 1,2,4 --ring-chunks 1,2 \
  --sm-margins 0,8,16,24 --comm-ctas 0,4,8 --reps 20 --warmup 5 --json "$OUT/bench-nvlink.json"
step 150 $TP sweep --nproc 2 --regime nvlink $MODEL --no-analyze --out "$S/nvlink" \
  --variants ring:2:bwd=off,ring:2,ring:2:margin=16,chunked:1:margin=8:ctas=4
tar czf "$OUT/sweeps.tar.gz" -C "$S" . && rm -rf "$S"
echo "== done t=$(( $(date +%s) - T0 ))s"
