#!/usr/bin/env bash
# Issue 5, second call: end to end with the levers of gpu_levers.sh. shm on the 2-block model
# (auto against the best fixed modes), shm on an 8-block model (same width, so the embedding and
# head that no fusion hides weigh less, as in a deep model), socket with the tightened auto rule.
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-560}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 200 $TP sweep --nproc 2 --regime shm --layers 2 $WIDE --steps 14 --profile-steps 3 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/shm" --variants chunked:4:margin=4,chunked:2:margin=4,auto
step 150 $TP sweep --nproc 2 --regime shm --layers 8 $WIDE --steps 10 --profile-steps 0 --no-analyze \
  --out "$S/shm-8blocks" --variants chunked:4:margin=4,chunked:2:margin=8
step 200 $TP sweep --nproc 2 --regime socket --layers 2 $WIDE --steps 12 --profile-steps 2 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/socket" --variants auto
tar czf "$OUT/sweeps.tar.gz" -C "$S" . && rm -rf "$S"
echo "== done t=$(( $(date +%s) - T0 ))s"
