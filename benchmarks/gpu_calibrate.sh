#!/usr/bin/env bash
# `tpscope calibrate` on the sample runs (metrics.md §8): each fused run's GEMM calls replayed alone
# on this GPU at SM margin 0 and at the run's margins, then `tpscope analyze --json` of each fused
# run against its unfused reference with those calibrations.
# Output in $OUT: cache/calibrations/*.json (copy them into $TPSCOPE_CACHE_DIR/calibrations, or
# ~/.cache/tpscope/calibrations, and `tpscope analyze` uses them), analyze-<run>.json, log.txt.
# Run from the repository root on one H200: OUT=gpu_out bash benchmarks/gpu_calibrate.sh 2>&1 | tee gpu_out/log.txt
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-500}
source "$(dirname "$0")/gpu_common.sh"
export TPSCOPE_CACHE_DIR="$OUT/cache"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
for pair in shm-chunked:shm-none shm-auto:shm-none nvlink-ring:nvlink-none nvlink-copy_engine:nvlink-none; do
  run=sample_traces/h200x2-${pair%%:*}; ref=sample_traces/h200x2-${pair##*:}
  step 120 $TP calibrate "$run" --samples 10 --per-sample 5
  step 60 $TP analyze "$run" --reference "$ref" --json --no-cache --out "$OUT/analyze-${pair%%:*}.json" --overwrite
done
echo "== done t=$(( $(date +%s) - T0 ))s"
