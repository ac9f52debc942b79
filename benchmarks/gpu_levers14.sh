#!/usr/bin/env bash
# Issue 5, third round: the other two reference shapes (docs/benchmarks.md) (S=4096 and S=16384 at the
# reference width), round-robin bench, final code, nvlink and shm.
# Output in $OUT: bench-{nvlink,shm}-shapes.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-200}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 90 $TP bench --regime nvlink --shape s4096 --shape s16384 --modes copy_engine,chunked,ring --chunks 1,2 \
  --ring-chunks 1,2 --reps 20 --warmup 5 --json "$OUT/bench-nvlink-shapes.json" 2>&1 | grep -Ev "$F"
step 100 $TP bench --regime shm --shape s4096 --shape s16384 --modes chunked,ring --chunks 2,4 --ring-chunks 2,4 \
  --sm-margins 0,16 --reps 20 --warmup 5 --json "$OUT/bench-shm-shapes.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
