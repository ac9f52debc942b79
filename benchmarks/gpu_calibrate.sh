#!/usr/bin/env bash
# `tpscope calibrate` for the four fused sample runs (metrics.md §8): each run's GEMM calls, read here
# into benchmarks/calibrate_plans/ (`tpscope calibrate RUN --plan-out`), replayed alone on one H200 at
# SM margin 0 and at the run's margins. The GPU machine has torch but not the analyzer's libraries;
# the replay needs neither.
# Output in $OUT: cache/calibrations/<key>.json, one per run. Back on the analyzer's machine, copy them
# into $TPSCOPE_CACHE_DIR/calibrations/ (else ~/.cache/tpscope/calibrations/) and run
# `tpscope analyze sample_traces/h200x2-<run> --reference sample_traces/h200x2-<shm|nvlink>-none`.
# Run from the repository root: mkdir -p gpu_out && OUT=gpu_out bash benchmarks/gpu_calibrate.sh 2>&1 | tee gpu_out/log.txt
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; BUDGET_S=${BUDGET_S:-300}
source "$(dirname "$0")/gpu_common.sh"
export TPSCOPE_CACHE_DIR="$OUT/cache"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
for run in shm-chunked shm-auto nvlink-ring nvlink-copy_engine; do
  step 90 $TP calibrate --plan "benchmarks/calibrate_plans/h200x2-$run.json" --samples 10 --per-sample 5
done
ls -l "$OUT/cache/calibrations"
echo "== done t=$(( $(date +%s) - T0 ))s"
