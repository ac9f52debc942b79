"""Record `tpscope sweep` folders brought back from the GPU machine into benchmarks/results/.

The GPU machine has no analyzer dependencies, so its sweeps run with `--no-analyze`; this script
runs the analyzer here on every run folder that holds traces, and writes one JSON per sweep with
the GPU script that made it, the sweep's command, and per run: the manifest's tokens/s, step times,
fusion per layer and `auto` record, and the analyzer's summary.

Usage: python benchmarks/collect_sweeps.py --script benchmarks/gpu_levers.sh --name levers1 SWEEPS_DIR
(SWEEPS_DIR holds one folder per sweep, e.g. shm/ and nvlink/; each becomes
benchmarks/results/h200x2-<name>-<sweep>.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpscope.metrics.analysis import analyze_run, as_json  # noqa: E402
from tpscope.trace import load_run  # noqa: E402

KEEP = ("command", "regime", "mode", "chunks", "sm_margin", "comm_ctas", "bwd_overlap", "embed_overlap",
        "ring_all_gather", "optimizer",
        "model",
        "tokens_per_step", "steps", "profiler", "step_times_ms", "timed_steps", "median_step_time_ms",
        "tokens_per_s", "peak_memory_bytes", "fusion_by_layer", "auto", "gpu_name", "torch_version",
        "nccl_version", "cuda_version", "nccl_env")


def collect(sweep: Path, script: str) -> dict:
    doc = json.loads((sweep / "sweep.json").read_text())
    for row in doc["runs"]:
        run_dir = sweep / row["run"]
        manifest = json.loads((run_dir / "tpscope_run.json").read_text())
        row["manifest"] = {k: manifest.get(k) for k in KEEP}
        if any(run_dir.glob("*.json.gz")) or any(run_dir.glob("*.pt.trace.json")):
            row["analyze"] = as_json(analyze_run(load_run(run_dir)))["summary"]
            row["analyze_note"] = "tpscope analyze, run here on the folder brought back"
    doc["script"] = script
    doc["sweep_command"] = doc["runs"][0]["manifest"]["command"]
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", required=True, help="the GPU script that made the sweeps")
    parser.add_argument("--name", required=True, help="results name: h200x2-<name>-<sweep>.json")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("sweeps", type=Path)
    args = parser.parse_args()
    for sweep in sorted(p for p in args.sweeps.iterdir() if (p / "sweep.json").exists()):
        path = Path(args.out) / f"h200x2-{args.name}-{sweep.name}.json"
        path.write_text(json.dumps(collect(sweep, args.script), indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
