#!/usr/bin/env bash
# Mode host_staged on 2 x H200 (nvidia-h200-x2): the runs that one GPU cannot make, in one call.
#  1. the mode end to end on two GPUs (benchmarks/host_staged_one_gpu.py --gpus 2): bandwidth, the
#     GEMMs beside the copy engines, both sides and both layers' backward checked against
#     references, 30 calls back to back, and each call timed with a GPU per process;
#  2. op level over shm, side by side with today's best (the ring): `tpscope bench` at the
#     reference and 8B shapes, ring and host_staged at 1, 2, 4 and 8 pieces (attained saving,
#     every output checked against unfused);
#  3. end to end over shm, one sweep of the reference model: unfused, the ring k=4 margin 4
#     (today's best fixed), the same with NCCL's shm transport copying by cudaMemcpy
#     (NCCL_SHM_USE_CUDA_MEMCPY=1: NCCL's own copy-engine path; last, as it has been seen to hang
#     elsewhere), host_staged k=1, 2, 4, and auto (which now probes host_staged too): tokens/s
#     against unfused and against the best;
#  4. the new sample runs: nvlink (none, copy_engine k=1, auto) and shm (none, the ring k=4
#     margin 4, host_staged k=2, auto), 6 profiled steps each, and a 2-rank plain training loop
#     with nested record_function ranges (benchmarks/nested_ranges_loop.py); each run folder's
#     size is printed (the sample runs must stay under 2 MB: if one is over, run its sweep again
#     with --layers 1).
# Budget: about 25 minutes (1: 3, 2: 5, 3: 8, 4: 9). Run from the repository root:
#   mkdir -p gpu_out && OUT=gpu_out bash benchmarks/host_staged_two_gpu.sh 2>&1 | tee gpu_out/log.txt
# Output in $OUT: host_staged_two_gpu.json, bench-shm.json, sweeps.tar.gz (every run folder and
# the auto probe cache), log.txt.
# Afterwards, on the analyzer's machine (it has the analyzer's libraries):
#   tar xzf gpu_out/sweeps.tar.gz -C runs/
#   tpscope analyze runs/shm/03-host_staged-k1 --reference runs/shm/00-none   # contention, overlap
#   for r in runs/shm/0*; do tpscope analyze "$r" --json --no-cache > "$r.json"; done
#   tpscope calibrate runs/samples-shm/01-ring-k4-margin4 --plan-out plan.json     # then on one GPU:
#   tpscope calibrate --plan plan.json --samples 10 --per-sample 5             # its contention figures
#   # against the estimate by shape class: tpscope analyze RUN --reference ... (docs/metrics.md §8)
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-1500}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
df -h /dev/shm
# (host_staged's region at the reference shape is 256 MiB per group; a /dev/shm without room for it
# makes the mode fall back to anonymous shared memory by itself: docs/runtime.md)

echo "== 1. the mode on two GPUs"
step 200 python3 benchmarks/host_staged_one_gpu.py --gpus 2 --out "$OUT/host_staged_two_gpu.json"

echo "== 2. op level over shm"
step 300 $TP bench --nproc 2 --regime shm --shape ref --shape 8b --modes ring,host_staged \
  --ring-chunks 1,2,4,8 --reps 20 --json "$OUT/bench-shm.json"

echo "== 3. end to end over shm (reference model)"
step 480 $TP sweep --nproc 2 --regime shm $WIDE --steps 20 --profile-steps 3 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/shm" \
  --variants ring:4:margin=4,host_staged:1,host_staged:2,host_staged:4,auto,ring:4:margin=4:NCCL_SHM_USE_CUDA_MEMCPY=1 \
  2>&1 | grep -Ev "$F"

echo "== 4. sample runs"
step 240 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 24 --profile-steps 6 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/samples-nvlink" --variants copy_engine:1,auto 2>&1 | grep -Ev "$F"
step 240 $TP sweep --nproc 2 --regime shm $WIDE --steps 24 --profile-steps 6 --no-analyze \
  --auto-cache "$S/auto_probe.json" --out "$S/samples-shm" --variants ring:4:margin=4,host_staged:2,auto \
  2>&1 | grep -Ev "$F"
step 90 python3 -m torch.distributed.run --standalone --nproc-per-node 2 benchmarks/nested_ranges_loop.py \
  --out "$S/nested-loop-2rank" --active 6
du -sh "$S"/samples-*/* "$S/nested-loop-2rank"

tar czf "$OUT/sweeps.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
