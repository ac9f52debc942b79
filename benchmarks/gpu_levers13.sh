#!/usr/bin/env bash
# Issue 5, third round, closing call: copy_engine's AG-GEMM with the shard's copy into the
# symmetric buffer, the first barrier and the own rows' copy on the side stream (the traces of
# gpu_levers9.sh showed 65 us of copies before and between the GEMMs on the compute stream).
# nvlink bench (round robin) and an nvlink sweep with profiled steps (the sample traces).
# Output in $OUT: bench-nvlink.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-330}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"; cp benchmarks/results/h200x2-levers10-auto-probe.json "$S/auto_probe.json"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 80 $TP bench --regime nvlink --shape ref --shape 8b --modes copy_engine,chunked,ring --chunks 1 --ring-chunks 1,2 \
  --reps 20 --warmup 5 --json "$OUT/bench-nvlink.json" 2>&1 | grep -Ev "$F"
step 200 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,copy_engine:2,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
