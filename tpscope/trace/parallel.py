"""Use every core: big trace files decoded in parts, many rank files over a process pool.

One file: the text of `traceEvents` is cut at event boundaries into one JSON document per core;
each part is decoded and extracted (`extract.py`) in its own process (forked, so the parts are
shared, not sent), and the raw columns are merged. A cut that does not give valid documents
(an unusual layout) is detected by the decoder, and the file is then read in one piece.

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

from tpscope.trace.extract import RawColumns, extract, merge
from tpscope.trace.schema import TraceFile

SPLIT_MIN_BYTES = 64 << 20  # below this, starting a process costs more than it saves (docs/benchmarks.md)
_EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_decoder = msgspec.json.Decoder(TraceFile)
_parts: list[bytes] = []  # set before forking; read by the workers


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Forking is safe only from a single-threaded process (no server threads holding locks)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def split_document(data: bytes, parts: int) -> list[bytes] | None:
    """`parts` JSON documents whose `traceEvents` together are the file's; None if no cut is found."""
    key = data.find(b'"traceEvents"')
    if key < 0:
        return None
    start = data.find(b"[", key)
    if start < 0:
        return None
    cuts = []
    for k in range(1, parts):
        m = _EVENT_BOUNDARY.search(data, max(start, len(data) * k // parts))
        if m is None:
            return None
        cuts.append(m.start() + 1)  # the comma after the closing brace
    out = []
    lo = None
    for k, cut in enumerate([*cuts, None]):
        if k == 0:
            body = data[:cut]
        elif cut is None:
            body = b'{"traceEvents":[' + data[lo + 1 :]
        else:
            body = b'{"traceEvents":[' + data[lo + 1 : cut]
        out.append(body + b"]}" if cut is not None else body)
        lo = cut
    return out


@dataclass(frozen=True, slots=True)
class DecodedParts:
    """A file decoded in parts: its header (no events) and its merged raw columns (times relative,
    `baseTimeNanoseconds` not yet added)."""

    header: TraceFile
    raw: RawColumns


def _decode_part(index: int) -> tuple[TraceFile, RawColumns] | None:
    try:
        trace = _decoder.decode(_parts[index])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    raw = extract(trace.traceEvents, 0)
    trace.traceEvents = []
    return trace, raw


def decode_in_parts(parts: list[bytes]) -> DecodedParts | None:
    """Decode and extract the documents of `split_document`, one process each; None when a part
    is not a valid document (the cut fell inside an event)."""
    global _parts
    workers = len(parts)
    _parts = parts
    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers - 1, mp_context=ctx) as pool:
            futures = [pool.submit(_decode_part, i) for i in range(1, workers)]
            results = [_decode_part(0)] + [f.result() for f in futures]
    finally:
        _parts = []
    if any(r is None for r in results):
        return None
    header = TraceFile()
    for trace, _ in results:
        for field in ("distributedInfo", "baseTimeNanoseconds", "deviceProperties", "hostname"):
            value = getattr(trace, field)
            if value is not None and getattr(header, field) in (None, msgspec.Raw()):
                setattr(header, field, value)
    return DecodedParts(header=header, raw=merge([raw for _, raw in results]))


def map_files(function, paths: list, workers: int) -> list:
    """`function(path)` for every path, over a process pool when that can help."""
    if workers <= 1 or len(paths) <= 1 or not can_fork():
        return [function(p) for p in paths]
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(paths)), mp_context=ctx) as pool:
        return list(pool.map(function, paths))
