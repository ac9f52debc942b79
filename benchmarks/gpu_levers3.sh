#!/usr/bin/env bash
# Issue 5, third call: nvlink end to end (20 steps: its ratios are within a few per cent), and shm
# again with auto beside the best fixed modes of the two calls before, on 2 and 8 blocks.
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-560}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 190 $TP sweep --nproc 2 --regime nvlink --layers 2 $WIDE --steps 20 --profile-steps 3 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/nvlink" --variants chunked:1,ring:2,auto
step 170 $TP sweep --nproc 2 --regime shm --layers 2 $WIDE --steps 16 --profile-steps 3 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/shm" --variants chunked:2:margin=8,chunked:4:margin=8,auto
step 170 $TP sweep --nproc 2 --regime shm --layers 8 $WIDE --steps 10 --profile-steps 0 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/shm-8blocks" --variants auto
tar czf "$OUT/sweeps.tar.gz" -C "$S" . && rm -rf "$S"
echo "== done t=$(( $(date +%s) - T0 ))s"
