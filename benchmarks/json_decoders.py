"""Which JSON decoder reads Kineto traces fastest (the choice behind tpscope/trace/decode.py).

    python3 benchmarks/json_decoders.py sample_traces/h200x2-shm-chunked --events 1000000

Decodes one tiled trace (real events) with: the standard library's json, orjson, msgspec
untyped (to dicts), and msgspec typed into tpscope's structs (`schema.py`), which skips every
field tpscope does not read. Prints the median of 3 runs with Python's garbage collector on (as a
program runs) and off, and the peak memory each adds.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    import msgspec
    import orjson
    from tile_trace import tile_run

    from tpscope.trace.schema import TraceFile

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", type=Path)
    p.add_argument("--events", type=int, default=1_000_000)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (path,) = tile_run(a.source, Path(tmp), a.events, ranks=1)
        data = gzip.decompress(path.read_bytes())
    typed = msgspec.json.Decoder(TraceFile)
    decoders = {
        "json (stdlib)": json.loads,
        "orjson": orjson.loads,
        "msgspec, untyped": msgspec.json.decode,
        "msgspec, typed (tpscope)": typed.decode,
    }
    print(f"{len(data) / 2**20:.0f} MiB of JSON")
    print("| decoder | seconds, GC on (median of 3) | seconds, GC off | peak MiB allocated |")
    print("|---|---|---|---|")
    for name, decode in decoders.items():
        times = {True: [], False: []}
        for gc_on in (True, False):
            for _ in range(3):
                gc.collect()
                if not gc_on:
                    gc.disable()
                t = time.perf_counter()
                doc = decode(data)
                times[gc_on].append(time.perf_counter() - t)
                gc.enable()
                del doc
        gc.collect()
        tracemalloc.start()
        doc = decode(data)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        del doc
        print(
            f"| {name} | {statistics.median(times[True]):.2f} | {statistics.median(times[False]):.2f} | {peak:.0f} |"
        )


if __name__ == "__main__":
    main()
