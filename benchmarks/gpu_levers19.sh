#!/usr/bin/env bash
# Issue 5, fourth round, fifth call: shm. The tapered chunk schedule (the exposed piece halved:
# the AG-GEMM's last, the GEMM-RS's first; tpscope.fusion.ops.schedule) side by side with even pieces;
# chunked AG-GEMM assembling the gathered input on the side stream as chunks land. Kineto traces
# of the shm bench's calls; the shm bench with 5 ms of GPU work queued ahead of each call.
# Output in $OUT: bench-trace-shm/, bench-shm.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-200}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
G="$F|^W1|\*\*\*|OMP_NUM"
step 60 torchrun --nproc-per-node 2 benchmarks/bench_trace.py --regime shm --shape ref --out "$OUT/bench-trace-shm" 2>&1 | grep -Ev "$G"
step 120 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 4,8 --ring-chunks 4,8 \
  --sm-margins 4,16 --taper 0,1 --feed-ahead-ms 5 --reps 20 --warmup 5 --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
