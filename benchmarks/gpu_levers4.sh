#!/usr/bin/env bash
# Issue 5, fourth call: auto probing SM margins 0 and 8 only (end to end, margin 8 beat margin 4
# in every sweep of gpu_levers*.sh while the isolated probe preferred 4), beside the best fixed
# mode and a larger margin, on 2 and 8 blocks in shm. Output in $OUT: sweeps.tar.gz, log.txt.
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-420}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 200 $TP sweep --nproc 2 --regime shm --layers 2 $WIDE --steps 16 --profile-steps 3 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/shm" --variants chunked:2:margin=8,chunked:2:margin=16,auto
step 150 $TP sweep --nproc 2 --regime shm --layers 8 $WIDE --steps 10 --profile-steps 0 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/shm-8blocks" --variants chunked:2:margin=8,auto
tar czf "$OUT/sweeps.tar.gz" -C "$S" . && rm -rf "$S"
echo "== done t=$(( $(date +%s) - T0 ))s"
