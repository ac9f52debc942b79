"""Make large traces from a real one by tiling it in time (real names and arguments).

    python benchmarks/tile_trace.py tests/data/h200-shm-chunked4 /tmp/big --events 1000000

Each copy of every rank's events is shifted by the trace's span (plus a 10 µs gap); correlation
ids, External ids and ProfilerStep numbers are renumbered so that copies stay distinct.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from pathlib import Path

ID_KEYS = ("correlation", "External id")


def tile_document(doc: dict, copies: int, steps: int = 5) -> dict:
    """`copies` copies of the trace laid end to end, grouped into `steps` ProfilerStep windows.

    The original ProfilerStep annotations are replaced by one CPU and one GPU annotation per group
    of copies, so that a big trace has a realistic handful of steps (HTA's iteration assignment
    costs time per step and per event).
    """
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    span = (t1 - t0) + 10.0
    max_id = (
        max(
            (
                int(e.get("args", {}).get(k, 0) or 0)
                for e in events
                for k in ID_KEYS
                if isinstance(e.get("args", {}).get(k), int)
            ),
            default=0,
        )
        + 1
    )
    step_events = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    cpu_step = next((e for e in step_events if e.get("cat") == "user_annotation"), None)
    gpu_step = next((e for e in step_events if e.get("cat") == "gpu_user_annotation"), None)
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M" and e not in step_events]
    out = list(meta)
    for k in range(copies):
        shift = k * span
        for e in body:
            c = dict(e)
            if "ts" in c:
                c["ts"] = c["ts"] + shift
            if "id" in c and isinstance(c["id"], int):
                c["id"] = c["id"] + k * max_id
            args = c.get("args")
            if args:
                args = dict(args)
                for key in ID_KEYS:
                    if isinstance(args.get(key), int):
                        args[key] = args[key] + k * max_id
                c["args"] = args
            out.append(c)
    per_step = max(1, math.ceil(copies / steps))
    for n, first in enumerate(range(0, copies, per_step)):
        last = min(first + per_step, copies)
        for template in (cpu_step, gpu_step):
            if template is not None:
                c = dict(template)
                c["name"] = f"ProfilerStep#{n}"
                c["ts"] = t0 + first * span
                c["dur"] = (last - first) * span - 10.0
                out.append(c)
    tiled = dict(doc)
    tiled["traceEvents"] = out
    return tiled


def tile_run(
    src: Path, dst: Path, events_per_rank: int, ranks: int | None = None, steps: int = 5
) -> list[Path]:
    """Write a run folder whose rank files each hold about `events_per_rank` events.

    With `ranks` larger than the source's rank count, source ranks are reused under new rank ids.
    """
    dst.mkdir(parents=True, exist_ok=True)
    sources = sorted(
        p
        for p in src.iterdir()
        if p.name.endswith((".json", ".json.gz")) and p.name != "tpscope_run.jsonc"
    )
    docs = [json.load(gzip.open(p) if p.name.endswith(".gz") else open(p)) for p in sources]
    n_ranks = ranks or len(docs)
    written = []
    for rank in range(n_ranks):
        doc = docs[rank % len(docs)]
        copies = max(1, math.ceil(events_per_rank / len(doc["traceEvents"])))
        tiled = tile_document(doc, copies, steps)
        info = dict(tiled.get("distributedInfo") or {})
        info.update({"rank": rank, "world_size": n_ranks})
        tiled["distributedInfo"] = info
        path = dst / f"rank{rank}.tiled.pt.trace.json.gz"
        path.write_bytes(gzip.compress(json.dumps(tiled).encode(), compresslevel=1))
        written.append(path)
    return written


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("src", type=Path)
    p.add_argument("dst", type=Path)
    p.add_argument("--events", type=int, default=1_000_000, help="events per rank file")
    p.add_argument("--ranks", type=int, default=None)
    p.add_argument("--steps", type=int, default=5, help="ProfilerStep windows per rank")
    a = p.parse_args()
    for path in tile_run(a.src, a.dst, a.events, a.ranks, a.steps):
        print(path, path.stat().st_size)


if __name__ == "__main__":
    main()
