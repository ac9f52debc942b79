#!/usr/bin/env bash
# Issue 5, fifth round, first call: the shm GEMM-RS ring is bound by how fast NCCL's send/recv
# moves its pieces over shared memory (about 15 % slower than the collectives, gpu_levers23.sh).
# NCCL's own transport settings, one bench per setting, everything else equal: the p2p chunk size
# (128 KiB off NVLink and the network by default), the buffer size, and the SHM transport's
# copy-engine memcpy (NCCL_SHM_USE_CUDA_MEMCPY, sender side or both sides). Both sides, chunked
# and ring, so that a setting which helps one and hurts the other shows.
# Output in $OUT: bench-shm-<setting>.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-420}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
ARGS="--regime shm --shape ref --sides ag,rs --modes chunked,ring --chunks 8 --ring-chunks 8,16 \
--sm-margins 4,16 --ring-all-gather 0,1 --reps 20 --warmup 5"
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV
bench() {  # name, then VAR=value... for this bench only
  local name=$1; shift
  ( export "$@"; echo "== setting $name: $*"
    step 90 $TP bench $ARGS --json "$OUT/bench-shm-$name.json" 2>&1 \
      | grep -Ev "$F" | awk '/NCCL INFO/ { sub(/.*NCCL INFO /, "NCCL read: ");
          if (/set by environment/ && !seen[$0]++) print; next } { print }'; true )
}
bench default NCCL_DEBUG=WARN
bench p2pchunk512k NCCL_P2P_PCI_CHUNKSIZE=524288 NCCL_P2P_NVL_CHUNKSIZE=1048576
bench p2pchunk2m NCCL_P2P_PCI_CHUNKSIZE=2097152 NCCL_P2P_NVL_CHUNKSIZE=2097152 NCCL_BUFFSIZE=16777216
bench buff16m NCCL_BUFFSIZE=16777216
bench cememcpy NCCL_SHM_USE_CUDA_MEMCPY=1
bench cememcpy3 NCCL_SHM_USE_CUDA_MEMCPY=1 NCCL_SHM_MEMCPY_MODE=3
echo "== done t=$(( $(date +%s) - T0 ))s"
