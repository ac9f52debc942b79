#!/usr/bin/env bash
# Issue 5, third round, second call: `copy_engine` after its CPU-side fix (the own shard's GEMM
# launched before the pulls are set up; workspace views made once). nvlink bench; nvlink sweep
# with `auto` probing copy_engine (fresh probe) and profiled steps (the sample traces), then a
# second nvlink sweep in another order for the run-to-run spread.
# Output in $OUT: bench-nvlink.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-540}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 70 $TP bench --regime nvlink --shape ref --shape 8b --modes copy_engine,ring,chunked --chunks 1 --ring-chunks 1,2 \
  --reps 20 --warmup 5 --json "$OUT/bench-nvlink.json" 2>&1 | grep -Ev "$F"
step 200 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,copy_engine:2,ring:2,auto 2>&1 | grep -Ev "$F"
step 120 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 16 --profile-steps 0 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink-again" --variants auto,copy_engine:2,copy_engine:2:bwd=off 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
