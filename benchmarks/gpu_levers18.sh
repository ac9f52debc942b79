#!/usr/bin/env bash
# Issue 5, fourth round, fourth call: copy_engine's pushing AG-GEMM without a barrier before the
# pushes (two regions of its own symmetric buffer used in turn). A back-to-back correctness
# check, Kineto traces of the bench's calls, the nvlink bench with 5 ms of GPU work queued ahead
# of each call at the four shapes, and an nvlink sweep with a fresh `auto` probe (profiled:
# the sample traces).
# Output in $OUT: bench-trace/, bench-nvlink-fa5.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
G="$F|^W1|\*\*\*|OMP_NUM"
step 60 torchrun --nproc-per-node 2 benchmarks/copy_engine_check.py 2>&1 | grep -Ev "$G"
step 60 torchrun --nproc-per-node 2 benchmarks/bench_trace.py --shape ref --out "$OUT/bench-trace" 2>&1 | grep -Ev "$G"
step 90 $TP bench --regime nvlink --shape ref --shape 8b --shape s4096 --shape s16384 \
  --modes copy_engine,symm_mem,chunked,ring --chunks 1,2 --ring-chunks 1,2 --copy-push 0,1 --feed-ahead-ms 5 \
  --reps 20 --warmup 5 --json "$OUT/bench-nvlink-fa5.json" 2>&1 | grep -Ev "$F"
step 230 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,copy_engine:2,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
