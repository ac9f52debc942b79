#!/usr/bin/env bash
# Issue 5, fourth round, third call: copy_engine's pushing AG-GEMM with its first barrier on the
# compute stream (on the side stream it waited for the own GEMM's last wave, gpu_levers16.sh's
# bench traces). Kineto traces of the bench's calls; the bench with 5 ms of GPU work queued
# ahead of each call, nvlink (every mode, the four shapes) and socket; an nvlink sweep with a
# fresh `auto` probe (profiled: the sample traces).
# Output in $OUT: bench-trace/, bench-*.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 60 torchrun --nproc-per-node 2 benchmarks/bench_trace.py --shape ref --out "$OUT/bench-trace" 2>&1 | grep -Ev "$F|^W1|\*\*\*|OMP_NUM"
step 90 $TP bench --regime nvlink --shape ref --shape 8b --shape s4096 --shape s16384 \
  --modes copy_engine,symm_mem,chunked,ring --chunks 1,2 --ring-chunks 1,2 --copy-push 0,1 --feed-ahead-ms 5 \
  --reps 20 --warmup 5 --json "$OUT/bench-nvlink-fa5.json" 2>&1 | grep -Ev "$F"
step 90 $TP bench --regime socket --shape ref --modes chunked,ring --chunks 2,4,8 --ring-chunks 1,2 \
  --sm-margins 0,16 --feed-ahead-ms 5 --reps 10 --warmup 3 --json "$OUT/bench-socket-fa5.json" 2>&1 | grep -Ev "$F"
step 230 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,copy_engine:2,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
