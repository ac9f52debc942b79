"""Use every core: big trace files decoded in parts, many rank files over a process pool.

One file: the text of `traceEvents` is cut at event boundaries, in place, into one JSON text per
core; each part is decoded and extracted (`extract.py`) in its own process (forked, so the text
is shared, not copied or sent), and the raw columns come back through a pipe and are merged. A cut
that does not give valid JSON (an unusual layout) is detected by the decoder, and the file is
then read in one piece.

Many files: each worker process loads whole files and returns their compact tables, so the
parent never holds more than the workers' files' events at once.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import msgspec

from tpscope.trace.decode import EVENTS_DECODER, TRACE_DECODER
from tpscope.trace.extract import RawColumns, extract, merge
from tpscope.trace.schema import TraceFile

SPLIT_MIN_BYTES = 64 << 20  # below this, starting a process costs more than it saves (docs/benchmarks.md)
_EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Forking is safe only from a single-threaded process (no server threads holding locks)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def split_in_place(buf: bytearray, parts: int) -> list[memoryview] | None:
    """Cut the `traceEvents` array of `buf` into `parts` JSON arrays by writing two bytes at each
    cut: the comma between two events becomes `]` and the blank after it `[`.

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
    bounds = [start]
    for k in range(1, parts):
        m = _EVENT_BOUNDARY.search(buf, max(bounds[-1] + 1, len(buf) * k // parts), end)
        while m is not None and m.end() - m.start() < 4:  # "}", ",", a blank, "{"
            m = _EVENT_BOUNDARY.search(buf, m.end(), end)
        if m is None:
            return None
        comma = m.start() + 1
        buf[comma : comma + 2] = b"]["
        bounds.append(comma)
    view = memoryview(buf)
    ends = [*bounds[1:], end]
    return [view[lo + (k > 0) : hi + 1] for k, (lo, hi) in enumerate(zip(bounds, ends))]


def header_of(buf: bytearray) -> TraceFile | None:
    """The top-level keys before and after the `traceEvents` array, without the events."""
    key = buf.find(b'"traceEvents"')
    end = buf.rfind(b"]")
    before = bytes(buf[:key]).rstrip()
    after = bytes(buf[end + 1 :]).lstrip(b" \t\r\n,")
    text = before + (b"" if before.endswith((b"{", b",")) else b",") + after
    try:
        return TRACE_DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # read in one piece, which says why
        return None


@dataclass(frozen=True, slots=True)
class DecodedParts:
    """A file decoded in parts: its header (no events) and its merged raw columns (times relative,
    `baseTimeNanoseconds` not yet added)."""

    header: TraceFile
    raw: RawColumns


def _decode_part(part: memoryview) -> RawColumns | None:
    try:
        events = EVENTS_DECODER.decode(part)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return extract(events, 0)


def _child(conn, part: memoryview) -> None:
    """Worker body: decode one part, send the raw columns, leave without tearing down."""
    try:
        conn.send(_decode_part(part))
    except BaseException:  # noqa: BLE001 - the parent treats any failure as "read in one piece"
        try:
            conn.send(None)
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(0)  # skip freeing half a million events: the process ends here


def decode_in_parts(buf: bytearray, workers: int) -> DecodedParts | None:
    """Decode and extract `buf` in `workers` processes (forked: the text is shared, not sent);
    None when it cannot be cut cleanly. `buf` is modified at the cuts."""
    header = header_of(buf)
    parts = split_in_place(buf, workers) if header is not None else None
    if parts is None:
        return None
    ctx = multiprocessing.get_context("fork")
    children = []
    for part in parts[1:]:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(send, part), daemon=True)
        proc.start()
        send.close()
        children.append((proc, recv))
    results = [_decode_part(parts[0])]
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
