#!/usr/bin/env bash
# Issue-5 lever: NCCL on high-priority streams (TORCH_NCCL_HIGH_PRIORITY=1), so that a
# collective's blocks are scheduled between the waves of a GEMM launched beside it instead of
# after all of them. The bench runs with and without it in this one call, then the sweeps run
# with it. Output in $OUT: benchp_<regime>_<prio>.json, sweepsp.tar.gz, log.txt.
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-420}
source "$(dirname "$0")/gpu_common.sh"
V="--shape ref --shape 8b --modes chunked,ring,symm_mem --chunks 1,2,4,8 --ring-chunks 1,2,4 --reps 20 --warmup 5"
for regime in nvlink shm; do
  step 60 env TORCH_NCCL_HIGH_PRIORITY=0 $TP bench --regime $regime $V --json "$OUT/benchp_${regime}_default.json"
  step 60 env TORCH_NCCL_HIGH_PRIORITY=1 $TP bench --regime $regime $V --json "$OUT/benchp_${regime}_high.json"
done
MODEL="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1 --steps 12 --profile-steps 2 --no-analyze"
S="$OUT/sweeps"; mkdir -p "$S"
export TORCH_NCCL_HIGH_PRIORITY=1
step 140 $TP sweep --nproc 2 --regime nvlink --variants chunked:1,chunked:2,ring:2,auto $MODEL --auto-cache "$S/auto_probe.json" --out "$S/nvlink-high"
step 140 $TP sweep --nproc 2 --regime shm --variants chunked:2,chunked:8,ring:4,auto $MODEL --auto-cache "$S/auto_probe.json" --out "$S/shm-high"
tar czf "$OUT/sweepsp.tar.gz" -C "$S" . && rm -rf "$S"
echo "== done t=$(( $(date +%s) - T0 ))s"
