#!/usr/bin/env bash
# Issue-5 call on the GPU machine (2 x H200): the new variants (own-shard-first chunked AG-GEMM
# beside the old rank order, chunked ring transfers) over the four shapes in nvlink and shm and
# the reference shape in socket, then `tpscope sweep` (unfused baseline, one change at a time,
# auto included) in nvlink and shm on the model whose MLP is the reference shape.
# Output in $OUT: bench5_<regime>.json, sweeps.tar.gz, log.txt.
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-540}
source "$(dirname "$0")/gpu_common.sh"
SHAPES4="--shape ref --shape s4096 --shape s16384 --shape 8b"
V="--modes chunked,ring,symm_mem --chunks 1,2,4,8 --ring-chunks 1,2,4 --rank-order --reps 20 --warmup 5"
step 80 $TP bench --regime nvlink $SHAPES4 $V --json "$OUT/bench5_nvlink.json"
step 110 $TP bench --regime shm $SHAPES4 $V --json "$OUT/bench5_shm.json"
step 70 $TP bench --regime socket --shape ref --modes chunked,ring --chunks 2,4,8 --ring-chunks 1,4 --rank-order --reps 20 --warmup 3 --json "$OUT/bench5_socket.json"
MODEL="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1 --steps 12 --profile-steps 2 --no-analyze"
S="$OUT/sweeps"; mkdir -p "$S"
step 150 $TP sweep --nproc 2 --regime nvlink --variants chunked:1,ring,auto,symm_mem $MODEL --out "$S/nvlink"
step 150 $TP sweep --nproc 2 --regime shm --variants chunked:8,chunked:4,ring:4,auto $MODEL --out "$S/shm"
cp ~/.cache/tpscope/auto_probe.json "$S/auto_probe.json" 2>/dev/null
tar czf "$OUT/sweeps.tar.gz" -C "$S" . && rm -rf "$S"
echo "== done t=$(( $(date +%s) - T0 ))s"
