#!/usr/bin/env bash
# First call on the GPU machine (2 x H200): versions, every mode once at a small shape on 2 GPUs,
# one short `tpscope run`. Writes under $OUT (default ./gpu_out).
set -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=.:$PYTHONPATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
nvidia-smi topo -m || true
python3 -c "import torch,sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count()); import torch.distributed as d; print('all_gather_single' in dir(d), 'all_gather_into_tensor' in dir(d))"
echo "== bench smoke nvlink  t=$(( $(date +%s)-t0 ))s"
python3 -m tpscope.cli bench --shape 2048,1024,4096 --reps 5 --warmup 2 --chunks 2,4 --json "$OUT/smoke_bench_nvlink.json"
echo "== bench smoke shm  t=$(( $(date +%s)-t0 ))s"
python3 -m tpscope.cli bench --regime shm --shape 2048,1024,4096 --reps 3 --warmup 1 --chunks 4 --modes chunked,ring --json "$OUT/smoke_bench_shm.json"
echo "== run smoke  t=$(( $(date +%s)-t0 ))s"
python3 -m tpscope.cli run --nproc 2 --mode chunked --chunks 4 --steps 6 --layers 2 --hidden 2048 --ffn 8192 --heads 16 --vocab 8192 --seq-len 2048 --batch 2 --out "$OUT/run_smoke"
ls -la "$OUT/run_smoke"; du -sh "$OUT/run_smoke"
python3 -c "import json; m=json.load(open('$OUT/run_smoke/tpscope_run.json')); print({k: m[k] for k in ('gpu_name','nccl_version','torch_version','tokens_per_s','step_times_ms','peak_memory_bytes')})"
echo "== run symm_mem  t=$(( $(date +%s)-t0 ))s"
python3 -m tpscope.cli run --nproc 2 --mode symm_mem --steps 4 --profile-steps 0 --layers 2 --hidden 2048 --ffn 8192 --heads 16 --vocab 8192 --seq-len 2048 --batch 2 --out "$OUT/run_symm"
tar czf "$OUT/run_smoke.tar.gz" -C "$OUT" run_smoke && rm -rf "$OUT/run_smoke" "$OUT/run_symm"
echo "== done t=$(( $(date +%s)-t0 ))s"
