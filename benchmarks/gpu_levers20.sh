#!/usr/bin/env bash
# Issue 5, fourth round, sixth call: shm again. Chunked AG-GEMM now issues every chunk's
# collective first (they ran with gaps of ~30 us, each waiting for the gathered-input copy of
# the chunk before) and keeps each chunk's buffer alive to the end (gpu_levers19.sh's k=8 rows
# were WRONG: a freed chunk buffer was handed to the next chunk's collective while a GEMM still
# read it). Kineto traces of the shm bench's calls; the shm bench, even and tapered pieces.
# Output in $OUT: bench-trace-shm/, bench-shm.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-200}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
G="$F|^W1|\*\*\*|OMP_NUM"
step 60 torchrun --nproc-per-node 2 benchmarks/bench_trace.py --regime shm --shape ref --out "$OUT/bench-trace-shm" 2>&1 | grep -Ev "$G"
step 120 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 4,8 --ring-chunks 4,8 \
  --sm-margins 4,16 --taper 0,1 --feed-ahead-ms 5 --reps 20 --warmup 5 --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
