#!/usr/bin/env bash
# Issue 5, seventh call (the session's last device minutes): the embedding's backward all-gather
# beside the optimizer update (embed_overlap), side by side on and off, in shm on the 2-block
# model; auto reads the probe cache of gpu_levers6.sh (same GPU, torch, NCCL, shapes, margins),
# so no probe time is spent. Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-165}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"; cp benchmarks/results/h200x2-levers6-auto-probe.json "$S/auto_probe.json"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 160 $TP sweep --nproc 2 --regime shm $WIDE --steps 14 --profile-steps 0 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/shm" --variants auto:embed=off,auto,chunked:4:margin=16:embed=off,chunked:4:margin=16 \
  2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
