"""The streamed reader's peak memory on text laid out against it, each layout read in a fresh process.

    PYTHONPATH=. python3 benchmarks/reader_memory.py [--big MiB] [--chunk MiB] [--tree DIR]

Each layout is written to a file and read by `stream.decode_streaming` (the C reader's chunk one
16th of the stream's, as by default: 1 MiB of 16 MiB) in a process of its own, after a small
trace was read there (first-use imports). The figure is the peak resident memory (VmHWM, reset
before reading) above the process before reading, less the columns returned, counted twice (the
parts' columns and their merge are held at once while they are merged), over the text in flight:
the stream's chunk, plus a run of text no event boundary splits (an event, blanks before a comma),
plus with two threads the two chunks read ahead.
`--tree` reads with another checkout of tpscope (its C reader built in place), to compare builds;
`--how threads` streams with two threads, `--how part` reads the events array held in memory as one
forked part reads its run (`stream.decode_span`; the text in flight is then the whole array).

Layouts: Kineto-like events with no blank at all; one event with a huge string argument; a long
run of blanks between events; deeply nested arguments and one event of many tiny values (a list of
small objects: a parse tree up to 5x its text); events far shorter than Kineto's (`{"ph":"i",
"ts":N}`, 18 bytes); names each longer than a chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENT = (
    '{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d.0, "dur": 5.0, '
    '"args": {"device": 0, "stream": 7, "correlation": %d, "grid": [132, 1, 1]}}'
)

CHILD = r"""
import io, json, re, sys
from tpscope.trace.read import native, stream

def status(key):
    return int(re.search(key + r":\s+(\d+)", open("/proc/self/status").read()).group(1)) * 1024

path, chunk, warm, how = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
native.extract_text.__defaults__ = (chunk // 16, 1)
stream.decode_streaming(io.BytesIO(open(warm, "rb").read()), 1 << 16)
if how == "part":  # the whole events array in memory, read as one forked part reads its run
    buf = bytearray(open(path, "rb").read())
    lo, hi = buf.index(b"[", buf.index(b'"traceEvents"')) + 1, buf.rindex(b"]")
with open(path, "rb") as fh:
    base = status("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")
    if how == "part":
        raw = stream.decode_span(buf, lo, hi)
    else:
        raw = stream.decode_streaming(fh, chunk, threads=2 if how == "threads" else 1).raw
    peak = status("VmHWM")
kept = sum(a.nbytes for g in raw.groups.values() for a in g.values())
kept += sum(len(s.encode()) for s in raw.symbols)
print(json.dumps({"peak": peak - base, "kept": kept}))
"""


def events(n: int, start: int = 0, with_args: str = "") -> str:
    event = EVENT.replace('"args": {', '"args": {' + with_args, 1) if with_args else EVENT
    return ",\n  ".join(event % (k % 7, 10 * k, k) for k in range(start, start + n))


def trace(body: str) -> bytes:
    return (
        '{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [\n  '
        + body
        + '\n], "traceName": "x", "baseTimeNanoseconds": 0}'
    ).encode()


def layouts(big: int, chunk: int) -> dict[str, tuple[bytes, int]]:
    """Layout -> (its text, the text in flight)."""
    compact = json.loads(trace(events(big // 180)))
    many = ", ".join('{"a": [{"b": 1}, {"b": 2}]}' for _ in range(big // 29))
    deep = '{"n": ' * 100 + "1" + "}" * 100
    tiny = ",".join(f'{{"ph":"i","ts":{k}}}' for k in range(big // 18))
    return {
        "compact, no blank": (json.dumps(compact, separators=(",", ":")).encode(), chunk),
        "one event with a huge string": (
            trace(events(500) + ",\n  " + events(1, 500, f'"blob": "{"x" * big}", ')
                  + ",\n  " + events(500, 501)),
            chunk + big,
        ),
        "a run of blanks between events": (
            trace(events(500) + "," + " " * big + events(500, 500)), chunk,
        ),
        "nested arguments, one event of tiny values": (
            trace(events(500, with_args=f'"deep": {deep}, ') + ",\n  "
                  + events(1, 500, f'"list": [{many}], ') + ",\n  " + events(500, 501)),
            chunk + big,
        ),
        "tiny events (18 bytes)": (trace(tiny), chunk),
        "names longer than a chunk": (
            trace(",\n  ".join(EVENT.replace("k%d", "n" * 2 * chunk + "%d") % (k, k, k)
                               for k in range(max(2, big // chunk)))),
            3 * chunk,
        ),
    }  # fmt: skip


def measure(text: bytes, chunk: int, tree: Path, how: str = "stream") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path, warm = Path(tmp) / "trace.json", Path(tmp) / "warm.json"
        path.write_bytes(text)
        warm.write_bytes(trace(events(3000)))
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(chunk), str(warm), how],
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tree,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(done.stdout)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--big", type=float, default=64, help="MiB no chunk can cut (or of text)")
    p.add_argument("--chunk", type=float, default=16, help="the stream's chunk, MiB")
    p.add_argument("--tree", type=Path, default=ROOT, help="the tpscope checkout to read with")
    p.add_argument(
        "--how",
        choices=("stream", "threads", "part"),
        default="stream",
        help="streamed by one thread or two, or the events array in memory read as one part",
    )
    a = p.parse_args()
    big, chunk = int(a.big * 2**20), int(a.chunk * 2**20)
    print("| layout | text MiB | in flight MiB | peak above baseline MB | columns MB | ratio |")
    print("|---|---|---|---|---|---|")
    for name, (text, in_flight) in layouts(big, chunk).items():
        if a.how == "part":  # the whole array is in memory
            in_flight = len(text)
        elif a.how == "threads":  # and the chunks read ahead: one queued, one being read
            in_flight += 2 * chunk
        m = measure(text, chunk, a.tree, a.how)
        ratio = (m["peak"] - 2 * m["kept"]) / in_flight
        print(
            f"| {name} | {len(text) / 2**20:.1f} | {in_flight / 2**20:.0f} | {m['peak'] / 1e6:.1f}"
            f" | {m['kept'] / 1e6:.1f} | {ratio:.2f} |"
        )


if __name__ == "__main__":
    main()
