#!/usr/bin/env bash
# Issue 5, third round, first call: copy-engine transfers. nvlink: the new `copy_engine` mode
# (peer copies over torch's symmetric memory, no SM) in the bench beside NCCL's modes and torch's
# symm_mem, then end to end; shm: NCCL's own copy-engine path for its shared-memory transport
# (NCCL_SHM_USE_CUDA_MEMCPY=1) against the default SM-driven one, bench and end to end.
# Output in $OUT: bench-*.json, sweeps.tar.gz, log.txt (the caller tees).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-560}
source "$(dirname "$0")/gpu_common.sh"
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
step 90 $TP bench --regime nvlink --shape ref --shape 8b --modes copy_engine,symm_mem,chunked,ring --chunks 1,2 \
  --ring-chunks 1,2 --reps 20 --warmup 5 --json "$OUT/bench-nvlink.json" 2>&1 | grep -Ev "$F"
step 60 env NCCL_SHM_USE_CUDA_MEMCPY=1 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 2,4 \
  --sm-margins 0,16 --reps 20 --warmup 5 --json "$OUT/bench-shm-cememcpy.json" 2>&1 | grep -Ev "$F"
step 60 $TP bench --regime shm --shape ref --shape 8b --modes chunked,ring --chunks 2,4 \
  --sm-margins 0,16 --reps 20 --warmup 5 --json "$OUT/bench-shm.json" 2>&1 | grep -Ev "$F"
step 170 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 14 --profile-steps 0 --no-analyze --out "$S/nvlink" \
  --variants copy_engine:1,copy_engine:2,ring:2 2>&1 | grep -Ev "$F"
step 140 env NCCL_SHM_USE_CUDA_MEMCPY=1 $TP sweep --nproc 2 --regime shm $WIDE --steps 14 --profile-steps 0 --no-analyze \
  --out "$S/shm-cememcpy" --variants chunked:4:margin=16,chunked:4 2>&1 | grep -Ev "$F"
step 60 $TP run --nproc 2 --regime nvlink --mode copy_engine --chunks 2 --layers 1 --hidden 2048 --ffn 8192 --heads 16 \
  --vocab 4096 --seq-len 4096 --steps 5 --profile-steps 1 --out "$S/ce-trace" 2>&1 | grep -Ev "$F"
tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
