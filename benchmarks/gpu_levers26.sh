#!/usr/bin/env bash
# Issue 5, fourth round, last call: the ring's all-gather exchange as a run option and an `auto`
# candidate off NVLink (cache schema 6). shm sweep: the ring at k=4, margin 16 with the exchange,
# and `auto` with a fresh probe (profiled).
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-220}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 210 $TP sweep --nproc 2 --regime shm $WIDE --steps 16 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/shm" --variants ring:4:margin=16:agx=on,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
