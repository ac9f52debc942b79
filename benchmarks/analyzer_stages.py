"""Where `tpscope analyze --json` spends its time, stage by stage, on one run folder.

    python3 benchmarks/tile_trace.py sample_traces/h200x2-shm-chunked /tmp/r1 --events 1000000 --ranks 1
    python3 benchmarks/analyzer_stages.py /tmp/r1 [--runs 3] [--workers N]

Meant for a folder of one rank file: with several, the pool's workers read them, and their read
and tables stages are not counted.
Each run is a fresh interpreter that runs the CLI in-process (`--json --no-cache`, stdout
discarded) with the stages' functions wrapped by timers:

- imports: from the interpreter's start to the CLI's `main` being importable (tpscope's modules
  byte-compiled first, as an installed package's are);
- read: each rank file to raw columns (`run_folder._read_raw`: gunzip, msgspec's typed decode,
  the extraction of columns; in parts over the cores for a big file);
- tables: the rank's tables and their compact form (`assemble`, `compact_rank`);
- analysis: `analyze_run` (every metric, the critical path included);
- JSON: the result's document (`json_fields`, which writes the paths' segments from their
  columns) and `jsonable.dumps` of it;
- total: the whole in-process wall time (imports included).

Prints one Markdown row per run and the range of each stage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import time
t0 = time.perf_counter()
import contextlib, io, json, sys
from tpscope.cli import main
import tpscope.jsonable as jsonable
import tpscope.metrics as metrics
import tpscope.trace.run_folder as run_folder
seconds = {"imports": time.perf_counter() - t0}

def timed(module, name, stage):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t
    setattr(module, name, wrapper)

timed(run_folder, "_read_raw", "read")
timed(run_folder, "assemble", "tables")
timed(run_folder, "compact_rank", "tables")
timed(metrics, "analyze_run", "analysis")
timed(jsonable, "dumps", "JSON")
import tpscope.metrics.analysis as analysis
timed(analysis, "json_fields", "JSON")
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["analyze", sys.argv[1], "--json", "--no-cache", *sys.argv[2:]])
assert rc == 0
seconds["total"] = time.perf_counter() - t0
print(json.dumps(seconds))
"""
STAGES = ("imports", "read", "tables", "analysis", "JSON", "total")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run", type=Path)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workers", type=int, default=None)
    a = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from analyzer_speed import compile_sources

    compile_sources()  # as an installed package's modules are
    extra = ["--workers", str(a.workers)] if a.workers else []
    rows = []
    for _ in range(a.runs):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(a.run), *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| run | " + " | ".join(STAGES) + " |")
    print("|---|" + "---|" * len(STAGES))
    for k, row in enumerate(rows, 1):
        print(f"| {k} | " + " | ".join(f"{row.get(s, 0.0):.2f}" for s in STAGES) + " |")
    spans = [
        f"{min(r.get(s, 0) for r in rows):.2f}-{max(r.get(s, 0) for r in rows):.2f}" for s in STAGES
    ]
    print("| range | " + " | ".join(spans) + " |")


if __name__ == "__main__":
    main()
