"""The one place that chooses how a trace file is read, by its text's size, the cores given and
whether the C reader is built (docs/benchmarks.md gives the measurements behind the rules).

- `parts`: the text cut into one part per worker (`parallel.py`), each read in a forked process
  (by the C reader where it is built, else msgspec); for big files on three cores or more, where
  a process per part also runs the numpy grouping in parallel.
- `stream`: one pass, a chunk at a time (`stream.py`); with the C reader and several workers each
  chunk is read by `threads` threads and the next one gunzipped meanwhile.
- Whatever a strategy cannot read (an odd layout or field type, a damaged file) goes to the
  one-piece reader (`decode.py`), which reads anything readable and names the problem.
"""

from __future__ import annotations

from dataclasses import dataclass

# below this much text, starting a process costs more than it saves (docs/benchmarks.md)
SPLIT_MIN_BYTES = 64 << 20
# below this much text, more threads than one cost more than they save: a chunk needs two spans
THREADS_MIN_BYTES = 8 << 20
# forked parts beat a threaded stream on 16 cores, not on 2 (1 M-event tiles of three runs:
# benchmarks/results/cpu16-reader-scaling-1m-2026-12-02)
PARTS_MIN_WORKERS = 3


@dataclass(frozen=True, slots=True)
class Plan:
    """How to read one file: `how` is "parts" or "stream"; `workers` processes (parts) or
    `threads` threads per chunk (stream)."""

    how: str
    workers: int = 1
    threads: int = 1


def choose(
    text_bytes: int | None, workers: int, native_built: bool, can_fork: bool, local: bool = True
) -> Plan:
    """The plan for a file of `text_bytes` of (gunzipped) text (None when unknown: a URL)."""
    if workers <= 1 or text_bytes is None or text_bytes < THREADS_MIN_BYTES:
        return Plan("stream")
    # without the C reader, msgspec holds Python's lock: processes are the only way to share
    many = workers >= PARTS_MIN_WORKERS or not native_built
    if text_bytes >= SPLIT_MIN_BYTES and many and can_fork and local:
        return Plan("parts", workers=workers)
    return Plan("stream", threads=workers if native_built else 1)
