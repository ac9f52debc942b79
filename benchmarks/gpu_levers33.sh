#!/usr/bin/env bash
# Issue 5, fifth round: the 512 KiB send/recv steps end to end. One shm sweep: unfused, the ring
# k=4 margin 4 with the runtime's default (NCCL_P2P_PCI_CHUNKSIZE=524288), and the same with
# NCCL's own 128 KiB (a sweep variant's NCCL setting).
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-200}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 190 $TP sweep --nproc 2 --regime shm $WIDE --steps 16 --profile-steps 3 --no-analyze \
  --out "$S/shm" --variants ring:4:margin=4,ring:4:margin=4:NCCL_P2P_PCI_CHUNKSIZE=131072 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
