#!/usr/bin/env bash
# Issue 5, fifth round, last call: the shm benches at S=4096 and S=16384 with the final code
# (512 KiB send/recv steps by default), both sides, so that "never slower than unfused" is
# measured at every reference shape (docs/benchmarks.md) with it; then socket at the 8B shape and S=4096
# (chunked only: the ring lost by 25-35 % there at the reference shape, gpu_levers28.sh).
# Output in $OUT: bench-shm-s4096-s16384.json, bench-socket-8b-s4096.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-400}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 140 $TP bench --regime shm --shape s4096 --shape s16384 --modes chunked,ring --chunks 4,8 --ring-chunks 2,4,8 \
  --sm-margins 4,16 --reps 20 --warmup 5 --json "$OUT/bench-shm-s4096-s16384.json" 2>&1 | grep -Ev "$F"
step 200 $TP bench --regime socket --shape 8b --shape s4096 --modes chunked --chunks 2,4 --sm-margins 0,16 \
  --reps 30 --warmup 3 --json "$OUT/bench-socket-8b-s4096.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
