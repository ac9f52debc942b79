#!/usr/bin/env bash
# The big call on the GPU machine (2 x H200): the bench matrix over the three regimes and the
# reference shapes, `tpscope run` for unfused and fused modes in nvlink and shm, TP=1 against
# TP=2 on the same model and global batch, then two issue-5 levers. Everything lands in $OUT
# (default ./gpu_out): bench_<regime>.json, runs.tar.gz (run folders), log.txt.
# Each step gets at most what is left of BUDGET_S, so one hang cannot eat the whole call.
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-570}
source "$(dirname "$0")/gpu_common.sh"
SHAPES4="--shape ref --shape s4096 --shape s16384 --shape 8b"
step 110 $TP bench --regime nvlink $SHAPES4 --reps 20 --warmup 5 --json "$OUT/bench_nvlink.json"
step 130 $TP bench --regime shm $SHAPES4 --reps 20 --warmup 5 --json "$OUT/bench_shm.json"
# Model whose MLP is the reference shape: tokens S = 8192 (seq 8192 x batch 1), H 8192, F 28672.
MODEL="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1 --steps 12 --profile-steps 2"
R="$OUT/runs"; mkdir -p "$R"
step 75 $TP run --nproc 2 --regime nvlink --mode none $MODEL --out "$R/h200x2-nvlink-none"
step 75 $TP run --nproc 2 --regime nvlink --mode chunked --chunks 4 $MODEL --out "$R/h200x2-nvlink-chunked"
step 75 $TP run --nproc 2 --regime nvlink --mode ring $MODEL --out "$R/h200x2-nvlink-ring"
step 75 $TP run --nproc 2 --regime nvlink --mode symm_mem $MODEL --out "$R/h200x2-nvlink-symm_mem"
step 75 $TP run --nproc 2 --regime shm --mode none $MODEL --out "$R/h200x2-shm-none"
step 75 $TP run --nproc 2 --regime shm --mode chunked --chunks 4 $MODEL --out "$R/h200x2-shm-chunked"
step 75 $TP run --nproc 2 --regime shm --mode ring $MODEL --out "$R/h200x2-shm-ring"
step 75 $TP run --nproc 1 --mode none $MODEL --profile-steps 0 --out "$R/h200x1-tp1-none"
tar czf "$OUT/runs.tar.gz" -C "$R" . && rm -rf "$R"
step 150 $TP bench --regime socket --shape ref --shape s4096 --shape 8b --reps 20 --warmup 3 --chunks 2,4 --json "$OUT/bench_socket.json"
# Issue-5 levers at the reference shape, nvlink: one connection per device; fewer NCCL channels.
step 50 env CUDA_DEVICE_MAX_CONNECTIONS=1 $TP bench --regime nvlink --shape ref --reps 20 --json "$OUT/bench_nvlink_maxconn1.json"
step 50 env NCCL_MAX_NCHANNELS=8 $TP bench --regime shm --shape ref --reps 20 --json "$OUT/bench_shm_nch8.json"
echo "== done t=$(( $(date +%s) - T0 ))s"
