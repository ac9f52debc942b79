#!/usr/bin/env bash
# Issue 5, fifth round, fourth call: `auto` with the paired rematch (cache schema 7). In
# gpu_levers29.sh the nvlink probe kept unfused for qkv and fc1, where copy_engine's median was
# ahead by 1.7 % and 1.3 % but the spreads overlapped, and auto trained 3.4 % slower than
# copy_engine k=1. The nvlink sweep again (copy_engine k=1, auto), then shm (auto).
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-300}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 170 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,auto 2>&1 | grep -Ev "$F"
step 130 $TP sweep --nproc 2 --regime shm $WIDE --steps 16 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/shm" --variants auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
