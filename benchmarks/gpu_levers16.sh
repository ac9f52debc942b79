#!/usr/bin/env bash
# Issue 5, fourth round, second call: copy_engine's AG-GEMM pushing each shard into the peers'
# buffers (the pull design waited for the shard's staging copy, which needs SMs the own GEMM
# holds: 131 us exposed per AG-GEMM in sample_traces/h200x2-nvlink-copy_engine), side by side
# with pulling; the bench with and without GPU work queued ahead of each call (--feed-ahead-ms:
# the CPU's launch time out of the measure, as in training); Kineto traces of the bench's calls;
# an nvlink sweep with the push design.
# Output in $OUT: bench-trace/, bench-*.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 60 torchrun --nproc-per-node 2 benchmarks/bench_trace.py --shape ref --out "$OUT/bench-trace" 2>&1 | grep -Ev "$F|^W1|\*\*\*|OMP_NUM"
for FA in 0 5; do
  step 90 $TP bench --regime nvlink --shape ref --shape 8b --shape s4096 --shape s16384 --modes copy_engine,symm_mem \
    --ring-chunks 1,2 --copy-push 0,1 --feed-ahead-ms $FA --reps 20 --warmup 5 --json "$OUT/bench-nvlink-fa$FA.json" 2>&1 | grep -Ev "$F"
done
step 90 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 2,4 --ring-chunks 2,4 \
  --sm-margins 0,4,16 --feed-ahead-ms 5 --reps 20 --warmup 5 --json "$OUT/bench-shm-fa5.json" 2>&1 | grep -Ev "$F"
step 200 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze \
  --out "$S/nvlink" --variants copy_engine:1,copy_engine:2 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
