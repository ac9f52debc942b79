#!/usr/bin/env bash
# Issue 5, fifth round: the nvlink sweep of gpu_levers30.sh once more (copy_engine k=1 and `auto`
# with the paired rematch, a fresh probe), for a second measure of auto against the best mode.
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-200}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 190 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
