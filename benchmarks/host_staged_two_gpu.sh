#!/usr/bin/env bash
# Mode host_staged on 2 x H200 (nvidia-h200-x2): the runs that one GPU cannot make.
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
#  4-5. the new sample runs: nvlink (none, copy_engine k=1, auto) and shm (none, the ring k=4
#     margin 4, host_staged k=2, auto), 6 profiled steps each, and a 2-rank plain training loop
#     with nested record_function ranges (benchmarks/nested_ranges_loop.py); each run folder's
#     size is printed (the sample runs must stay under 2 MB: if one is over, run its sweep again
#     with --layers 1).
# Five parts, each under 10 minutes (PART=1..5 runs one; no PART runs all, about 30 minutes):
#   1 the mode on two GPUs, 2 the op-level bench, 3 the shm sweep, 4 the nvlink sample runs,
#   5 the shm sample runs and the nested-ranges loop. Run from the repository root:
#   mkdir -p gpu_out && PART=1 OUT=gpu_out bash benchmarks/host_staged_two_gpu.sh 2>&1 | tee -a gpu_out/log.txt
# Output in $OUT: host_staged_two_gpu.json (1), bench-shm.json (2), sweeps-part<N>.tar.gz (3-5:
# the run folders and the auto probe cache), log.txt.
# Afterwards, on the analyzer's machine (it has the analyzer's libraries):
#   for t in gpu_out/sweeps-part*.tar.gz; do tar xzf "$t" -C runs/; done
#   tpscope analyze runs/shm/03-host_staged-k1 --reference runs/shm/00-none   # contention, overlap
#   for r in runs/shm/0*; do tpscope analyze "$r" --json --no-cache > "$r.json"; done
#   tpscope calibrate runs/samples-shm/01-ring-k4-margin4 --plan-out plan.json     # then on one GPU:
#   tpscope calibrate --plan plan.json --samples 10 --per-sample 5             # its contention figures
#   # against the estimate by shape class: tpscope analyze RUN --reference ... (docs/metrics.md §8)
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-590}; PART=${PART:-}
source "$(dirname "$0")/gpu_common.sh"
F='UserWarning|return super|_warn_once|losses.append|Consider using|Warning: |^step '
WIDE="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
S="$OUT/sweeps"; mkdir -p "$S"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
df -h /dev/shm
# (host_staged's region at the reference shape is 256 MiB per group; a /dev/shm without room for it
# makes the mode fall back to anonymous shared memory by itself: docs/runtime.md)

part() { [[ -z "$PART" || "$PART" == "$1" ]]; }
if [[ -z "$PART" ]]; then BUDGET_S=1900; fi

if part 1; then
  echo "== 1. the mode on two GPUs"
  step 240 python3 benchmarks/host_staged_one_gpu.py --gpus 2 --out "$OUT/host_staged_two_gpu.json"
fi
if part 2; then
  echo "== 2. op level over shm"
  step 400 $TP bench --nproc 2 --regime shm --shape ref --shape 8b --modes ring,host_staged \
    --ring-chunks 1,2,4,8 --reps 20 --json "$OUT/bench-shm.json"
fi
if part 3; then
  echo "== 3. end to end over shm (reference model)"
  step 560 $TP sweep --nproc 2 --regime shm $WIDE --steps 20 --profile-steps 3 --no-analyze \
    --auto-cache "$S/auto_probe.json" --out "$S/shm" \
    --variants ring:4:margin=4,host_staged:1,host_staged:2,host_staged:4,auto,ring:4:margin=4:NCCL_SHM_USE_CUDA_MEMCPY=1 \
    2>&1 | grep -Ev "$F"
fi
if part 4; then
  echo "== 4. sample runs over nvlink"
  step 400 $TP sweep --nproc 2 --regime nvlink $WIDE --steps 24 --profile-steps 6 --no-analyze \
    --auto-cache "$S/auto_probe.json" --out "$S/samples-nvlink" --variants copy_engine:1,auto 2>&1 | grep -Ev "$F"
fi
if part 5; then
  echo "== 5. sample runs over shm, and a plain loop with nested ranges"
  step 420 $TP sweep --nproc 2 --regime shm $WIDE --steps 24 --profile-steps 6 --no-analyze \
    --auto-cache "$S/auto_probe.json" --out "$S/samples-shm" --variants ring:4:margin=4,host_staged:2,auto \
    2>&1 | grep -Ev "$F"
  step 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 benchmarks/nested_ranges_loop.py \
    --out "$S/nested-loop-2rank" --active 6
fi
du -sh "$S"/* 2>/dev/null
tar czf "$OUT/sweeps-part${PART:-all}.tar.gz" -C "$S" .
echo "== done t=$(( $(date +%s) - T0 ))s"
