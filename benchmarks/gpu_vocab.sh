#!/usr/bin/env bash
# After the vocabulary-parallel embedding/head: the end-to-end sweeps again (same model options
# and global batch as before), TP=1 against TP=2, and socket. NCCL high priority is the runtime's
# default now. Output in $OUT: sweepsv.tar.gz, log.txt.
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-420}
source "$(dirname "$0")/gpu_common.sh"
MODEL="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1 --steps 12 --profile-steps 2"
S="$OUT/sweeps"; mkdir -p "$S"
step 130 $TP sweep --nproc 2 --regime nvlink --variants chunked:1,ring:2,auto $MODEL --no-analyze --auto-cache "$S/auto_probe.json" --out "$S/nvlink"
step 130 $TP sweep --nproc 2 --regime shm --variants chunked:8,chunked:2,auto $MODEL --no-analyze --auto-cache "$S/auto_probe.json" --out "$S/shm"
step 45 $TP run --nproc 1 --mode none $MODEL --profile-steps 0 --out "$S/tp1/h200x1-tp1-none"
step 130 $TP sweep --nproc 2 --regime socket --variants chunked:2,auto $MODEL --no-analyze --auto-cache "$S/auto_probe.json" --out "$S/socket"
tar czf "$OUT/sweepsv.tar.gz" -C "$S" . && rm -rf "$S"
echo "== done t=$(( $(date +%s) - T0 ))s"
