#!/usr/bin/env bash
# Issue 5, fourth round, closing call: the shm GEMM-RS ring's send/recv ran on 2 CTAs where the
# collectives ran on 4 (gpu_levers23.sh traces: grid [2,1,1] against [4,1,1]) and moved its
# bytes slower; NCCL_NCHANNELS_PER_PEER=4 gives send/recv 4 channels. The shm GEMM-RS bench
# without and with it, one after the other in one call.
# Output in $OUT: bench-shm-rs-{default,4ch}.json, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-150}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
ARGS="--regime shm --shape ref --sides rs --modes chunked,ring --chunks 4,8 --ring-chunks 4,8 --sm-margins 4,16 --reps 20 --warmup 5"
step 60 $TP bench $ARGS --json "$OUT/bench-shm-rs-default.json" 2>&1 | grep -Ev "$F"
export NCCL_NCHANNELS_PER_PEER=4
step 60 $TP bench $ARGS --json "$OUT/bench-shm-rs-4ch.json" 2>&1 | grep -Ev "$F"
echo "== done t=$(( $(date +%s) - T0 ))s"
