#!/usr/bin/env bash
# The checks that one H200 can make, in one call (about 9 minutes at most):
#  1. benchmarks/gpu_training_check.sh part 1: the reference shape at TP=1 learns (50 steps);
#  2. benchmarks/gpu_calibrate.sh: `tpscope calibrate` replays of the four fused sample runs' GEMMs;
#  3. benchmarks/stop_check.py --nproc 1: a CUDA run stops on SIGTERM/SIGINT/launcher death;
#  4. `tpscope bench` on one GPU refuses two ranks in one line;
#  5. a short `tpscope run` whose trace records cuda_sync events (the critical path's stream waits).
# Run from the repository root: OUT=gpu_out bash benchmarks/gpu_one_h200_checks.sh
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=.:$PYTHONPATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/gpu_work; rm -rf "$W"; mkdir -p "$W"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
  echo "== 1. training check"; OUT="$W/train" BUDGET_S=170 bash benchmarks/gpu_training_check.sh
  echo "== 2. calibrate"; OUT="$W/cal" BUDGET_S=230 bash benchmarks/gpu_calibrate.sh
  echo "== 3. stop check"; timeout 100 python3 benchmarks/stop_check.py --nproc 1; echo "exit $?"
  echo "== 4. bench on one GPU"; timeout 60 python3 -m tpscope.cli bench --shape 32,16,32; echo "exit $?"
  echo "== 5. a run with cuda_sync events"
  timeout 120 python3 -m tpscope.cli run --nproc 1 --steps 8 --profile-steps 2 --layers 2 --hidden 2048 --ffn 8192 \
    --heads 16 --vocab 8192 --seq-len 2048 --batch 2 --out "$W/sync-run" 2>&1 | tail -3
  python3 - "$W/sync-run" <<'PY'
import collections, gzip, json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.pt.trace.json.gz")):
    ev = json.load(gzip.open(f))["traceEvents"]
    print(f.name, dict(collections.Counter(e["name"] for e in ev if e.get("cat") == "cuda_sync")))
PY
} 2>&1 | tee "$OUT/log.txt"
cp "$W/train/summary.txt" "$OUT/training_summary.txt" 2>/dev/null
cp "$W/train/tp1-none/tpscope_run.json" "$OUT/training_tp1_manifest.json" 2>/dev/null
mkdir -p "$OUT/calibrations"; cp "$W"/cal/cache/calibrations/*.json "$OUT/calibrations/" 2>/dev/null
tar czf "$OUT/sync-run.tgz" -C "$W" sync-run 2>/dev/null
ls -la "$OUT" "$OUT/calibrations"
