#!/usr/bin/env bash
# Does the reference model train, and do fused modes train the same model in bf16?
#  1. One H200, TP=1, the reference shape, 50 steps with the default recipe: per-step losses, and
#     whether the mean loss of the last 5 steps is at least 20% below the first 5's.
#  2. With 2 GPUs or more: the same shape at TP=2, 50 steps, unfused and each fused mode (bf16),
#     and each fused run's largest per-step relative difference of the loss from unfused's: the
#     bfloat16 tolerance of `tpscope report` (tpscope/fusion/losses.py, LOSS_RTOL).
# Writes the run manifests and a summary under $OUT (default ./out). About 4 minutes on 2 x H200.
# Run from the repository root: PYTHONPATH=. bash benchmarks/gpu_training_check.sh
OUT=${OUT:-out}; mkdir -p "$OUT"
BUDGET_S=${BUDGET_S:-290}
source "$(dirname "$0")/gpu_common.sh"
REF="--layers 2 --hidden 8192 --ffn 28672 --heads 64 --vocab 32000 --seq-len 8192 --batch 1"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count(), torch.cuda.get_device_name(0))"
step 120 $TP run --nproc 1 --mode none --steps 50 --profile-steps 0 $REF --out "$OUT/tp1-none" --overwrite
NGPU=$(python3 -c "import torch; print(torch.cuda.device_count())")
if (( NGPU >= 2 )); then
  for v in none:1 chunked:4 ring:4 copy_engine:1 symm_mem:1; do
    mode=${v%%:*}; k=${v##*:}
    step 60 $TP run --nproc 2 --regime nvlink --mode "$mode" --chunks "$k" --steps 50 --profile-steps 0 $REF \
      --out "$OUT/tp2-$mode" --overwrite > "$OUT/tp2-$mode.log" 2>&1
    tail -n 2 "$OUT/tp2-$mode.log"
  done
fi
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
from pathlib import Path
from tpscope.runfolder.losses import loss_agreement, loss_trend
out = Path(sys.argv[1])
def losses(name):
    p = out / name / "tpscope_run.json"
    return json.loads(p.read_text())["losses"] if p.is_file() else None
tp1 = losses("tp1-none")
if tp1:
    first, last = sum(tp1[:5]) / 5, sum(tp1[-5:]) / 5
    print("tp1 losses:", " ".join(f"{x:.3f}" for x in tp1))
    print(f"tp1: first 5 mean {first:.4f}, last 5 mean {last:.4f}, fall {(1 - last / first) * 100:.1f}% "
          f"({'PASS' if last <= 0.8 * first else 'FAIL'}: at least 20%); trend {loss_trend(tp1)}")
base = losses("tp2-none")
if base:
    print("tp2 none losses:", " ".join(f"{x:.3f}" for x in base))
    for mode in ("chunked", "ring", "copy_engine", "symm_mem"):
        cand = losses(f"tp2-{mode}")
        if cand:
            a = loss_agreement(base, cand, rtol=1.0)
            rels = [abs(c - b) / abs(b) for b, c in zip(base, cand)]
            print(f"bf16 {mode} vs none: largest relative difference {a.worst_rel:.3e} at step {a.worst_step}; "
                  f"over steps 1-10 {max(rels[:10]):.3e}; last-5 mean {sum(cand[-5:]) / 5:.4f} "
                  f"vs {sum(base[-5:]) / 5:.4f}")
PY
echo "== done t=$(( $(date +%s) - T0 ))s"
