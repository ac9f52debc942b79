"""Which JSON decoder reads Kineto traces fastest (the choice behind tpscope/trace/read/decode.py).

    python3 benchmarks/json_decoders.py sample_traces/h200x2-shm-chunked --events 1000000

Decodes one tiled trace (real events) with: the standard library's json, orjson, msgspec
untyped (to dicts), and msgspec typed into tpscope's structs (`schema.py`), which skips every
field tpscope does not read. Prints the median of 3 runs with Python's garbage collector on (as a
program runs) and off, and the peak memory each adds.

Then, from the same text to columns (the median of 3): tpscope's C reader (`trace/read/native.py`,
yyjson; one thread, then two), msgspec typed plus tpscope's extraction (`trace/read/extract.py`, what
is used where the C reader is not built), and, when they are installed, the columnar JSON readers of polars
(`read_json` with a schema of the fields tpscope reads) and pyarrow (`pyarrow.json.read_json`,
which reads one object after another, so the array's separating commas are made newlines
first). Neither is a dependency of tpscope; a reader that refuses the trace says why.
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

    from tpscope.trace.read.schema import TraceFile

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
    to_columns(data)


def to_columns(data: bytes) -> None:
    """Seconds from the JSON text to typed columns, each reader's median of 3."""
    import io
    import re

    from tpscope.trace.read.decode import EVENTS_DECODER
    from tpscope.trace.read.extract import extract

    start = data.index(b"[", data.index(b'"traceEvents"'))
    end = data.rindex(b"]")
    array = memoryview(data)[start : end + 1]

    def tpscope_columns():
        return extract(EVENTS_DECODER.decode(array), 0)

    from tpscope.trace.read import native

    readers = {
        "tpscope's C reader (yyjson), one thread": lambda: native.extract_text(
            data, start + 1, end
        ),
        "tpscope's C reader (yyjson), two threads": lambda: native.extract_text(
            data, start + 1, end, threads=2
        ),
        "msgspec typed + tpscope's extraction": tpscope_columns,
    }
    try:
        import polars as pl

        def polars_columns():
            args = pl.Struct(
                {k: pl.Int64 for k in ("device", "stream", "correlation", "External id")}
            )
            schema = {"ph": pl.String, "cat": pl.String, "name": pl.String, "pid": pl.String}
            schema |= {"tid": pl.String, "ts": pl.Float64, "dur": pl.Float64, "args": args}
            return pl.read_json(io.BytesIO(array), schema=schema)

        readers[f"polars {pl.__version__} read_json (schema)"] = polars_columns
    except ImportError:
        pass
    try:
        import pyarrow as pa
        import pyarrow.json as pj

        def arrow_columns():
            lines = re.sub(rb"\}\s*,\s*\{", b"}\n{", array[1:-1])
            ints = [(k, pa.int64()) for k in ("device", "stream", "correlation", "External id")]
            fields = [(k, pa.string()) for k in ("ph", "cat", "name")]
            fields += [("ts", pa.float64()), ("dur", pa.float64()), ("args", pa.struct(ints))]
            options = pj.ParseOptions(
                explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore"
            )
            return pj.read_json(pa.BufferReader(lines), parse_options=options)

        readers[f"pyarrow {pa.__version__} read_json (newline-delimited first)"] = arrow_columns
    except ImportError:
        pass
    print()
    print("| to columns | seconds (median of 3) |")
    print("|---|---|")
    for name, read in readers.items():
        times = []
        try:
            for _ in range(3):
                t = time.perf_counter()
                read()
                times.append(time.perf_counter() - t)
        except Exception as exc:  # noqa: BLE001 - a reader's refusal is a result
            print(f"| {name} | refused: {str(exc).splitlines()[0][:120]} |")
            continue
        print(f"| {name} | {statistics.median(times):.2f} |")


if __name__ == "__main__":
    main()
