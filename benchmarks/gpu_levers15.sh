#!/usr/bin/env bash
# Ran at commit f52b40b (the --tail-fill option was removed after it).
# Issue 5, fourth round, first call: tail fill (the GEMMs of received rows on a second,
# higher-priority stream, so that each starts in the last wave of the GEMM before it).
# 1. What splitting a GEMM costs and what the second stream wins back, no communication
#    (benchmarks/gemm_split.py).
# 2. Round-robin bench, tail_fill off and on side by side: copy_engine over nvlink at the four
#    reference shapes (docs/benchmarks.md), chunked AG-GEMM over shm.
# 3. nvlink sweep with copy_engine (tail fill on by default) against unfused, profiled.
# Output in $OUT: gemm-split.json, bench-*.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-420}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 60 torchrun --nproc-per-node 2 benchmarks/gemm_split.py --json "$OUT/gemm-split.json" 2>&1 | grep -Ev "$F"
step 90 $TP bench --regime nvlink --shape ref --shape 8b --shape s4096 --shape s16384 --modes copy_engine \
  --ring-chunks 1,2 --tail-fill 0,1 --reps 20 --warmup 5 --json "$OUT/bench-nvlink.json" 2>&1 | grep -Ev "$F"
step 90 $TP bench --regime shm --shape ref --shape 8b --sides ag --modes chunked --chunks 2,4 \
  --sm-margins 0,4,16 --tail-fill 0,1 --reps 20 --warmup 5 --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
step 200 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze \
  --out "$S/nvlink" --variants copy_engine:1,copy_engine:2 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
