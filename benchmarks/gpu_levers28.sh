#!/usr/bin/env bash
# Issue 5, fifth round, second call: NCCL_P2P_PCI_CHUNKSIZE=524288 is now a runtime default
# (gpu_levers27.sh: the shm ring's send/recv in 512 KiB steps). With it: the shm benches at the
# reference shape (the ring at 4 and 8 pieces, margins 0, 4, 16; 1 MiB steps as a check), the
# 8B shape, socket (its ring sends over the same path), then the shm sweep with a fresh `auto`
# probe (ring candidates up to 8 pieces, cache schema 7).
# Output in $OUT: bench-*.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
SHM="--regime shm --modes chunked,ring --ring-chunks 4,8 --reps 20 --warmup 5"
step 70 $TP bench $SHM --shape ref --chunks 8 --sm-margins 0,4,16 --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
( export NCCL_P2P_PCI_CHUNKSIZE=1048576
  step 70 $TP bench $SHM --shape ref --chunks 8 --sm-margins 4,16 --json "$OUT/bench-shm-1m.json" 2>&1 | grep -Ev "$F" )
step 60 $TP bench $SHM --shape 8192,4096,14336 --chunks 4,8 --sm-margins 4,16 --json "$OUT/bench-shm-8b.json" 2>&1 | grep -Ev "$F"
step 90 $TP bench --regime socket --shape ref --modes chunked,ring --chunks 2 --ring-chunks 2,4,8 --sm-margins 0,16 \
  --reps 30 --warmup 3 --json "$OUT/bench-socket.json" 2>&1 | grep -Ev "$F"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
step 230 $TP sweep --nproc 2 --regime shm $WIDE --steps 16 --profile-steps 3 --no-analyze --auto-cache "$S/auto_probe.json" \
  --out "$S/shm" --variants ring:8:margin=4,ring:4:margin=4,chunked:8:margin=16,auto 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
