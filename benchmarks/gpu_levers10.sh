#!/usr/bin/env bash
# Issue 5, third round, third call: `auto` with PROBE_BATCH steps per probe sample (the CPU runs
# ahead, as in training) and copy_engine's own-row copy on the copy engine. nvlink AG bench;
# nvlink and shm sweeps with a fresh probe and profiled steps (the sample traces).
# Output in $OUT: bench-nvlink-ag.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 40 $TP bench --regime nvlink --shape ref --shape 8b --sides ag --modes copy_engine --ring-chunks 1 \
  --reps 20 --warmup 5 --json "$OUT/bench-nvlink-ag.json" 2>&1 | grep -Ev "$F"
step 190 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,auto 2>&1 | grep -Ev "$F"
step 230 $TP sweep --nproc 2 --regime shm $WIDE --steps 16 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/shm" --variants chunked:4:margin=16,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
