#!/usr/bin/env bash
# Issue 5, fourth round, seventh call: shm GEMM-RS. The ring's pieces swapped by one all-gather
# each (two ranks) against send/recv (gpu_levers20.sh's traces: send/recv moved 16-18 MiB pieces
# at about 21 GB/s, the all-gathers of chunked AG-GEMM at about 23 GB/s), even and tapered; the
# AG side again with the final chunked code.
# Output in $OUT: bench-shm.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-150}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 120 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 4,8 --ring-chunks 4,8 \
  --sm-margins 4,16 --taper 0,1 --ring-all-gather 0,1 --feed-ahead-ms 5 --reps 20 --warmup 5 \
  --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
