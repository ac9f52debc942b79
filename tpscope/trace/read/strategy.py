"""The one place that chooses how a trace file is read, by its text's size, the cores given and
whether the C reader is built (docs/benchmarks.md gives the measurements behind the rules).

- `parts`: the text cut into one part per worker (`parallel.py`), each read in a forked process
  (by the C reader where it is built, else msgspec); for big files on three cores or more, where
  a process per part also runs the numpy grouping in parallel.
  A gzip file is inflated on the way, each part forked once its text is there; on
  `INFLATE_MIN_WORKERS` cores or more, where rapidgzip is installed, by half as many threads in
  a process of its own, the parts decoding on the other half as its text lands.
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
# on 16 cores, inflating a gzip file in parallel beat inflating it in one stream while its parts
# decode (benchmarks/results/cpu16-parallel-inflate-2026-12-02), and inflating it over 8 threads
# while the parts decode as its text lands beat both 16 threads so and 16 threads inflating it
# whole first, in time and in peak memory (benchmarks/results/cpu16-parts-as-text-lands-2026-12-03);
# fewer cores are not measured, so they inflate in one stream
INFLATE_MIN_WORKERS = 16


@dataclass(frozen=True, slots=True)
class Plan:
    """How to read one file: `how` is "parts" or "stream"; `workers` processes (parts) or
    `threads` threads per chunk (stream); `inflate_threads` threads that inflate a gzip file in a
    process of their own while it is cut (parts; 1: inflated in one stream as it is cut)."""

    how: str
    workers: int = 1
    threads: int = 1
    inflate_threads: int = 1


def choose(
    text_bytes: int | None,
    workers: int,
    native_built: bool,
    can_fork: bool,
    local: bool = True,
    parallel_inflate: bool = False,
) -> Plan:
    """The plan for a file of `text_bytes` of (gunzipped) text (None when unknown: a URL);
    `parallel_inflate`: whether a parallel gzip inflater (rapidgzip) is installed."""
    if workers <= 1 or text_bytes is None or text_bytes < THREADS_MIN_BYTES:
        return Plan("stream")
    # without the C reader, msgspec holds Python's lock: processes are the only way to share
    many = workers >= PARTS_MIN_WORKERS or not native_built
    if text_bytes >= SPLIT_MIN_BYTES and many and can_fork and local:
        inflate = max(2, workers // 2) if parallel_inflate and workers >= INFLATE_MIN_WORKERS else 1
        return Plan("parts", workers=workers, inflate_threads=inflate)
    return Plan("stream", threads=workers if native_built else 1)
