"""The map result of each rank file against the file: bytes pickled, per run folder.

    PYTHONPATH=. python3 benchmarks/map_results.py sample_traces/h200x2-* tests/data/real/* \
        --out benchmarks/results/map_results.json

Per run, summed over its ranks: the trace files' bytes on disk (gzip), their JSON text
(gunzipped), the map results as the cache stores them and Ray or the process pool send them to
the driver (`PackedRank`, `trace/compact.py`), the same unpacked (the pickled `RankTrace` the
reduce reads), and that before the map cuts the CPU ops (`assemble` alone).
"""

from __future__ import annotations

import argparse
import gzip
import json
import pickle
import sys
from pathlib import Path

from tpscope.trace import run_folder
from tpscope.trace.assemble import assemble
from tpscope.trace.compact import pack


def measure(folder: Path) -> dict:
    files = run_folder.find_trace_files(folder)
    row = {
        "run": folder.name,
        "ranks": len(files),
        "file_bytes": 0,
        "text_bytes": 0,
        "map_result_bytes": 0,
        "unpacked_bytes": 0,
        "uncut_bytes": 0,
    }
    for f in files:
        row["file_bytes"] += f.stat().st_size
        raw = f.read_bytes()
        row["text_bytes"] += len(gzip.decompress(raw)) if raw[:2] == b"\x1f\x8b" else len(raw)
        rank = run_folder.load_rank_file(f)
        row["map_result_bytes"] += len(pickle.dumps(pack(rank), protocol=pickle.HIGHEST_PROTOCOL))
        row["unpacked_bytes"] += len(pickle.dumps(rank, protocol=pickle.HIGHEST_PROTOCOL))
        trace, cols, warnings = run_folder._read_raw(f, 1)
        uncut = assemble(f, trace, cols, 0, tuple(warnings))
        row["uncut_bytes"] += len(pickle.dumps(uncut, protocol=pickle.HIGHEST_PROTOCOL))
    row["over_file"] = row["map_result_bytes"] / row["file_bytes"]
    row["over_text"] = row["map_result_bytes"] / row["text_bytes"]
    return row


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    rows = [measure(r) for r in a.runs]
    print(
        "| run | ranks | files (gzip) | JSON text | map results | / files | / text | unpacked | before the cut |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['run']} | {r['ranks']} | {r['file_bytes'] / 1e6:.2f} MB | {r['text_bytes'] / 1e6:.1f} MB | "
            f"{r['map_result_bytes'] / 1e6:.2f} MB | {r['over_file']:.2f} | {r['over_text']:.3f} | "
            f"{r['unpacked_bytes'] / 1e6:.2f} MB | {r['uncut_bytes'] / 1e6:.2f} MB |"
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps({"command": "python3 " + " ".join(sys.argv), "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
