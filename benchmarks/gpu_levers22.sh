#!/usr/bin/env bash
# Issue 5, fourth round, eighth call: shm end to end with the final code (chunked AG-GEMM issuing
# its collectives first, the ring tapered by default) and a fresh `auto` probe (profiled: the
# sample traces); the shm bench once more with the defaults (every ring tapered).
# Output in $OUT: bench-shm.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-330}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 250 $TP sweep --nproc 2 --regime shm $WIDE --steps 16 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/shm" --variants chunked:8:margin=16,ring:4:margin=4,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
step 60 $TP bench --regime shm --shape ref --modes chunked,ring --chunks 4,8 --ring-chunks 4,8 \
  --sm-margins 4,16 --reps 20 --warmup 5 --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
