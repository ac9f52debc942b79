#!/usr/bin/env bash
# Issue 5, fifth round, third call: with NCCL_P2P_PCI_CHUNKSIZE=524288 a default and the ring at
# 8 pieces an `auto` candidate (cache schema 7, fresh probes): the nvlink sweep again (copy_engine
# k=1 and auto against unfused: the setting should not matter there), and the shm sweep of
# gpu_levers28.sh repeated (ring k=4 margin 4 and auto against unfused).
# Output in $OUT: sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-330}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 170 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 20 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/nvlink" --variants copy_engine:1,auto 2>&1 | grep -Ev "$F"
step 160 $TP sweep --nproc 2 --regime shm $WIDE --steps 16 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/shm" --variants ring:4:margin=4,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
