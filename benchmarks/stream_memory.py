"""Peak memory of reading one rank file: the streaming pass against the one-piece reader.

    python3 benchmarks/tile_trace.py sample_traces/h200x2-shm-chunked /tmp/big1m --events 1000000 --ranks 1
    python3 benchmarks/tile_trace.py sample_traces/h200x2-shm-chunked /tmp/big4m --events 4000000 --ranks 1
    PYTHONPATH=. python3 benchmarks/stream_memory.py /tmp/big1m/*.gz /tmp/big4m/*.gz \
        --out benchmarks/results/stream_memory.json

Each measurement runs `load_rank_file` (one process, no pool) in a fresh interpreter and reports
its wall time and peak RSS (getrusage), the RSS of the interpreter with tpscope imported and
nothing read, the sizes of the file (gzip and text) and of the result (the pickled `RankTrace`,
what the map of `--engine ray` sends and what a cache would store).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import gzip, json, pickle, resource, sys, time
from pathlib import Path
from tpscope.trace import run_folder
from tpscope.trace.read import stream
mode, path = sys.argv[1], Path(sys.argv[2])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if mode == "one_piece":
    stream.decode_streaming = lambda fh, chunk_bytes, threads=1: None
t = time.perf_counter()
r = run_folder.load_rank_file(path)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"mode": mode, "wall_s": wall, "peak_rss_mb": peak / 1024, "import_rss_mb": base / 1024,
                  "result_bytes": len(pickle.dumps(r, protocol=5)), "gpu_rows": len(r.gpu)}))
"""


def text_bytes(path: Path) -> int:
    import gzip

    n = 0
    with gzip.open(path) as fh:
        while chunk := fh.read(1 << 24):
            n += len(chunk)
    return n


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    rows = []
    for f in a.files:
        size = {"file": f.name, "gz_bytes": f.stat().st_size, "text_bytes": text_bytes(f)}
        for mode in ("stream", "one_piece"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, mode, str(f)],
                capture_output=True,
                text=True,
                check=True,
            )
            row = size | json.loads(out.stdout)
            row["result_over_text"] = row["result_bytes"] / row["text_bytes"]
            row["result_over_gz"] = row["result_bytes"] / row["gz_bytes"]
            rows.append(row)
            print(
                json.dumps(
                    {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}
                ),
                flush=True,
            )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "command": " ".join(sys.argv),
            "machine": platform.node(),
            "python": platform.python_version(),
            "rows": rows,
        }
        a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
