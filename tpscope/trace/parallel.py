"""Use every core: big trace files decoded in parts, many rank files over a process pool.

One file: the `traceEvents` array of the text is cut at event boundaries into one run of events
per core; each run is decoded and extracted (`extract.py`) in its own process (forked, so the text
is shared, not copied or sent), a piece of `stream.CHUNK_BYTES` at a time so that only one piece's
events exist at once, and the raw columns come back through a pipe and are merged. A cut that
does not give valid JSON (an unusual layout) is detected by the decoder, and the file is then
read in one piece.

Many files: each worker process loads whole files and returns their compact tables, so the
parent never holds more than the workers' files' events at once.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
from concurrent.futures import ProcessPoolExecutor

import msgspec

from tpscope.trace.decode import TRACE_DECODER
from tpscope.trace.extract import merge
from tpscope.trace.schema import TraceFile
from tpscope.trace.stream import DecodedParts, decode_span

# below this, starting a process costs more than it saves (docs/benchmarks.md)
SPLIT_MIN_BYTES = 64 << 20
_EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Forking is safe only from a single-threaded process (no server threads holding locks)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def part_spans(buf: bytes, parts: int) -> list[tuple[int, int]] | None:
    """Cut the `traceEvents` array of `buf` into `parts` runs of whole events: per part, (lo, hi)
    such that `buf[lo:hi]` is its events separated by commas (no brackets). The text is not changed.

    None when the file has no such array or no cut with a blank after the comma (Kineto writes
    `},\n  {`, Python's json `}, {`). The keys around the array come back through
    `header_of`. A cut inside an event (a nested `}, {`) gives invalid JSON, which the decoder
    reports, so it is never silently wrong.
    """
    key = buf.find(b'"traceEvents"')
    start = buf.find(b"[", key) if key >= 0 else -1
    end = buf.rfind(b"]")
    if start < 0 or end <= start:
        return None
    commas = [start]
    for k in range(1, parts):
        m = _EVENT_BOUNDARY.search(buf, max(commas[-1] + 1, len(buf) * k // parts), end)
        while m is not None and m.end() - m.start() < 4:  # "}", ",", a blank, "{"
            m = _EVENT_BOUNDARY.search(buf, m.end(), end)
        if m is None:
            return None
        commas.append(m.start() + 1)
    return [(lo + 1, hi) for lo, hi in zip(commas, [*commas[1:], end])]


def header_of(buf: bytes) -> TraceFile | None:
    """The top-level keys before and after the `traceEvents` array, without the events."""
    key = buf.find(b'"traceEvents"')
    end = buf.rfind(b"]")
    before = bytes(buf[:key]).rstrip()
    after = bytes(buf[end + 1 :]).lstrip(b" \t\r\n,")
    text = before + (b"" if before.endswith((b"{", b",")) else b",") + after
    try:
        return TRACE_DECODER.decode(text)
    except (
        msgspec.DecodeError,
        msgspec.ValidationError,
        RecursionError,
    ):
        # read in one piece, which says why
        return None


def _child(conn, buf: bytes, lo: int, hi: int) -> None:
    """Worker body: decode one part, send the raw columns, leave without tearing down."""
    try:
        conn.send(decode_span(buf, lo, hi))
    except BaseException:  # noqa: BLE001 - the parent treats any failure as "read in one piece"
        try:
            conn.send(None)
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(0)  # skip freeing half a million events: the process ends here


def decode_in_parts(buf: bytes, workers: int) -> DecodedParts | None:
    """Decode and extract `buf` in `workers` processes (forked: the text is shared, not sent or
    copied; each part is decoded a piece at a time, `stream.decode_span`); None when it cannot be
    cut cleanly."""
    header = header_of(buf)
    spans = part_spans(buf, workers) if header is not None else None
    if spans is None:
        return None
    ctx = multiprocessing.get_context("fork")
    children = []
    for lo, hi in spans[1:]:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(send, buf, lo, hi), daemon=True)
        proc.start()
        send.close()
        children.append((proc, recv))
    results = [decode_span(buf, *spans[0])]
    for proc, recv in children:
        try:
            results.append(recv.recv())
        except (EOFError, OSError):
            results.append(None)
        proc.join()
    if any(r is None for r in results):
        return None
    return DecodedParts(header=header, raw=merge(results))


def map_files(function, paths: list, workers: int) -> list:
    """`function(path)` for every path, over a process pool when that can help."""
    if workers <= 1 or len(paths) <= 1 or not can_fork():
        return [function(p) for p in paths]
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(paths)), mp_context=ctx) as pool:
        return list(pool.map(function, paths))
