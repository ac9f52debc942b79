#!/usr/bin/env bash
# Issue 5, third round, last call: the bench with round-robin timing (tpscope.fusion.tuning.timing.
# time_regions: every timed function in turn within each repetition, so that the GEMM alone, the
# unfused op and each variant see the same GPU clocks), in all three regimes, final code.
# Output in $OUT: bench-{nvlink,shm,socket}.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-420}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 90 $TP bench --regime nvlink --shape ref --shape 8b --modes copy_engine,symm_mem,chunked,ring --chunks 1,2 \
  --ring-chunks 1,2 --reps 20 --warmup 5 --json "$OUT/bench-nvlink.json" 2>&1 | grep -Ev "$F"
step 120 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 2,4,8 --ring-chunks 1,2,4 \
  --sm-margins 0,4,16 --reps 20 --warmup 5 --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
step 150 $TP bench --regime socket --shape ref --modes chunked,ring --chunks 2,4,8 --ring-chunks 1,2 \
  --sm-margins 0,16 --reps 10 --warmup 3 --json "$OUT/bench-socket.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
