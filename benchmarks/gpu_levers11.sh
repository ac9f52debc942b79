#!/usr/bin/env bash
# Issue 5, third round, fourth call: the final code (copy_engine's own-row copy back on the
# compute stream) on the 8-block model of the same width, nvlink and shm, each beside its best
# fixed mode; auto reads the probe cache of gpu_levers10.sh (same GPU, software and layer shapes).
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-330}
source "$(dirname "$0")/gpu_common.sh"
DEEP="--layers 8 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"; cp benchmarks/results/h200x2-levers10-auto-probe.json "$S/auto_probe.json"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 160 $TP sweep --nproc 2 --regime nvlink $DEEP --steps 12 --profile-steps 0 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink-8blocks" --variants copy_engine:1,auto 2>&1 | grep -Ev "$F"
step 160 $TP sweep --nproc 2 --regime shm $DEEP --steps 10 --profile-steps 0 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/shm-8blocks" --variants chunked:4:margin=16,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
