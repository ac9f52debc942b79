#!/usr/bin/env bash
# Issue 5, fourth round, ninth call: the shm ring GEMM-RS swapping its pieces by all-gather gave
# the best median and the widest spreads (gpu_levers21.sh: k8/m4 3.191 ms [3.077-3.466], k8/m16
# 3.764): Kineto traces of both exchanges at 8 chunks and margins 4 and 16, and the bench at 40
# repetitions.
# Output in $OUT: bench-trace-shm-rs/, bench-shm-rs.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-150}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
G="$F|^W1|\*\*\*|OMP_NUM"
step 60 torchrun --nproc-per-node 2 benchmarks/bench_trace.py --regime shm --set rs-exchange --shape ref \
  --out "$OUT/bench-trace-shm-rs" 2>&1 | grep -Ev "$G"
step 80 $TP bench --regime shm --shape ref --sides rs --modes ring --ring-chunks 4,8 --sm-margins 4,8,16 \
  --ring-all-gather 0,1 --reps 40 --warmup 5 --json "$OUT/bench-shm-rs.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
