"""One trace file decoded in a single streaming pass, its memory bounded by the chunk, not the file.

The (gunzipped) text is read `chunk_bytes` at a time. Inside the `traceEvents` array each chunk
is cut after its last event boundary (`cut.py`), the whole events before the cut are decoded
(the C reader, else msgspec and `extract.py`), and only their raw columns are kept; the events are freed before the next chunk is read. The
parts are merged at the end (`extract.merge`), exactly as the parts of `parallel.py` are.

The keys around the array (`distributedInfo`, `baseTimeNanoseconds`, ...) are decoded from the
text before and after it. Anything unusual (no `traceEvents` array, a cut that does not give
valid JSON, a field of an odd type, broken gzip data) makes `decode_streaming` return None and
the caller reads the file in one piece, where the tolerant decoder and the precise error
messages live (`decode.py`). A cut is never silently wrong: the decoder validates every part.

Memory: what is held beside the columns is a few times the text in flight, the chunk plus any
event no cut can split (docs/benchmarks.md, "Reader memory by layout"). A run of blanks after an
event's comma is dropped as it is read, not held.
"""

from __future__ import annotations

import gzip
import queue
import re
import threading
from dataclasses import dataclass
from typing import BinaryIO

import msgspec

from tpscope.trace.read import cut
from tpscope.trace.read.decode import (
    EVENTS_DECODER,
    GZIP_ERRORS,
    GZIP_MAGIC,
    TRACE_DECODER,
    decode_run,
)
from tpscope.trace.read.extract import RawColumns, extract, merge
from tpscope.trace.read.native import available as native_available
from tpscope.trace.read.native import extract_text
from tpscope.trace.read.schema import TraceFile


@dataclass(frozen=True, slots=True)
class DecodedParts:
    """A file decoded in parts: its header (no events) and its merged raw columns (times relative,
    `baseTimeNanoseconds` not yet added)."""

    header: TraceFile
    raw: RawColumns


try:  # ISA-L's streaming inflate, as decode.py's one-shot one
    from isal import igzip as _gzip_module
except ImportError:  # pragma: no cover - isal is a dependency
    _gzip_module = gzip

CHUNK_BYTES = 16 << 20  # text per part: peak memory ~ a few times this (docs/benchmarks.md)
_KEY = b'"traceEvents"'
_ARRAY_END = re.compile(rb"\}\s*\]")
_TEXT = re.compile(rb"[^ \t\r\n]")  # the first byte that is not a JSON blank
_BLANK_RUN = 1 << 12  # blanks at a chunk's end this long are dropped where they follow a cut
_END_TRIES = 8
READ_ERRORS = (OSError, *GZIP_ERRORS)
# text this reader gives up on: the one-piece reader says why (RecursionError: nested too deeply)
_NOT_DECODED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def open_text(fh: BinaryIO) -> BinaryIO:
    """The file's JSON text as a stream: gunzipped on the fly when it is gzip (by its magic)."""
    head = fh.peek(2)[:2] if hasattr(fh, "peek") else b""
    if not head:
        head = fh.read(2)
        fh.seek(0)
    return _gzip_module.GzipFile(fileobj=fh, mode="rb") if head == GZIP_MAGIC else fh


def decode_span(
    buf: bytes | bytearray, lo: int, hi: int, chunk_bytes: int = CHUNK_BYTES
) -> RawColumns | None:
    """Extract the events `buf[lo:hi]` (whole events separated by commas, a part cut by
    `parallel.read_in_parts`) about `chunk_bytes` of text at a time, so that only one piece's events
    exist at once (a piece cut inside an event grows to a later boundary: `decode.decode_run`);
    None when the text is not valid JSON or not well typed."""
    native = extract_text(buf, lo, hi)  # the C reader, where it is built, cuts its own chunks
    if native is not None:
        return native
    parts: list[RawColumns] = []
    while lo < hi:
        stop = cut.last_cut(buf, lo, lo + chunk_bytes) if hi - lo > chunk_bytes else -1
        events = decode_run(buf, lo, hi if stop < 0 else stop, hi)
        if events is None:
            return None
        parts.append(extract(events[0], 0))
        lo = events[1] + 1
        del events
    return merge(parts) if parts else None


def _decode_part(buf: bytearray, stop: int, threads: int = 1) -> RawColumns:
    """Extract the JSON array `buf[:stop]` (copied: decoded `Raw` fields point into their text)."""
    native = extract_text(buf, 1, stop - 1, threads=threads)  # inside the "[" and "]"
    if native is not None:
        return native
    with memoryview(buf) as whole:
        text = bytes(whole[:stop])
    return extract(EVENTS_DECODER.decode(text), 0)


def _array_end(buf: bytearray, threads: int = 1) -> tuple[int, RawColumns | None]:
    """Where the events array that `buf` starts ends (the index of its `]`), and its events'
    columns; (-1, None) when no candidate decodes. Keys after the array may hold arrays too, so
    each `}]` is tried in order (the first one ends the array unless an event nests objects in
    a list)."""
    if re.match(rb"\[\s*\]", buf):
        return buf.index(b"]"), None
    for k, m in enumerate(_ARRAY_END.finditer(buf, 1)):
        if k == _END_TRIES:
            break
        try:
            return m.end() - 1, _decode_part(buf, m.end(), threads)
        except _NOT_DECODED:
            continue
    return -1, None


def decode_streaming(
    fh: BinaryIO, chunk_bytes: int = CHUNK_BYTES, threads: int = 1
) -> DecodedParts | None:
    """Decode and extract the trace text read from `fh` chunk by chunk; None when the file
    needs the one-piece reader (see the module docstring). Times are relative: the caller adds
    `baseTimeNanoseconds` (`RawColumns.shift_times`).

    With `threads > 1` (and the C reader built), the next chunk is read (gunzipped) in a thread
    while the current one is read into columns by `threads` threads (`native.extract_text`)."""
    chunk_bytes = max(1 << 10, chunk_bytes)
    text = open_text(fh)
    ahead = _ReadAhead(text, chunk_bytes) if threads > 1 and native_available() else None
    try:
        return _decode(ahead or text, chunk_bytes, threads if ahead else 1)
    except (*_NOT_DECODED, *READ_ERRORS):
        return None
    finally:
        if ahead is not None:
            ahead.close()


class _ReadAhead:
    """A binary stream read `chunk_bytes` at a time in a thread, one chunk ahead of its reader
    (gunzip and reading from disk let go of the GIL)."""

    def __init__(self, text: BinaryIO, chunk_bytes: int) -> None:
        self._text = text
        self._chunk_bytes = chunk_bytes
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                data = self._text.read(self._chunk_bytes)
                self._queue.put(data)
                if not data:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, raised there
            self._queue.put(exc)

    def read(self, size: int = -1) -> bytes:
        """The next chunk (b"" at the end); with `size < 0`, all that is left."""
        if size >= 0:
            return self._next()
        rest = []
        while data := self._next():
            rest.append(data)
        return b"".join(rest)

    def _next(self) -> bytes:
        if self._thread is None:
            return b""
        got = self._queue.get()
        if isinstance(got, BaseException):
            raise got
        if not got:
            self._thread.join()
            self._thread = None
        return got

    def close(self) -> None:
        """Stop the thread (it may be blocked handing over a chunk nobody wants)."""
        if self._thread is not None:
            self._stop.set()
            while self._thread.is_alive():
                try:
                    self._queue.get(timeout=0.05)
                except queue.Empty:
                    pass
            self._thread = None


def _last_text(buf: bytearray, end: int) -> int:
    """Index of the last byte of `buf[:end]` that is not a blank, -1 when none."""
    while end > 0:
        lo = max(0, end - (1 << 16))
        piece = bytes(buf[lo:end]).rstrip(b" \t\r\n")
        if piece:
            return lo + len(piece) - 1
        end = lo
    return -1


def _cut_before_blanks(buf: bytearray, parts: list[RawColumns], threads: int) -> bool:
    """Where `buf` ends with "}", blanks, ",", blanks (a run of blanks between events, its
    "{" not read yet): the events before the comma decoded into `parts` and `buf` left as "[",
    True; False (nothing changed) where that is no cut."""
    comma = _last_text(buf, len(buf))
    if comma <= 0 or buf[comma] != ord(",") or buf[_last_text(buf, comma)] != ord("}"):
        return False
    buf[comma] = ord("]")
    try:
        parts.append(_decode_part(buf, comma + 1, threads))
    except msgspec.DecodeError:  # inside an event: text to keep
        buf[comma] = ord(",")
        return False
    del buf[1:]
    return True


def _decode_to_last_cut(buf: bytearray, tried: int, parts: list[RawColumns], threads: int) -> int:
    """The events of `buf` (an array opened by its "[") up to its last cut past `tried` decoded
    into `parts` and let go, `buf` left as "[" and the rest; the new `tried` (0 after a cut; the
    failed cut where the text before it is not valid JSON)."""
    at = cut.last_cut(buf, tried + 1, len(buf))
    if at < 0:
        return tried
    buf[at] = ord("]")
    try:
        parts.append(_decode_part(buf, at + 1, threads))
    except msgspec.DecodeError:
        # a cut inside an event (a nested "}, {"), or past the array in the keys after it:
        # no cut before it; the chunk grows to the next one (or to the end of the text)
        buf[at] = ord(",")
        return at
    buf[at] = ord("[")
    del buf[:at]
    return 0


def _decode(text: BinaryIO, chunk_bytes: int, threads: int = 1) -> DecodedParts | None:
    buf = bytearray()
    key = -1
    while key < 0:  # the text before the array: the header's first keys
        data = text.read(chunk_bytes)
        if not data:
            return None
        buf += data
        key = buf.find(_KEY)
    while (start := buf.find(b"[", key)) < 0:
        data = text.read(chunk_bytes)
        if not data:
            return None
        buf += data
    if buf[key + len(_KEY) : start].strip() != b":":
        return None
    prefix = bytes(buf[:key])
    del buf[:start]  # buf[0] is "[": every part is decoded in place as buf[0:cut] + "]"
    parts: list[RawColumns] = []
    tried = 0  # buf[:tried + 1] holds no cut that gives valid JSON
    first = True
    while True:
        data = text.read(chunk_bytes)
        if not data:
            break
        if first and len(buf) > 1:  # more text: the header chunk's events are read before it
            tried = _decode_to_last_cut(buf, tried, parts, threads)
        first = False
        if not tried and not _TEXT.search(data) and _cut_before_blanks(buf, parts, threads):
            continue  # blanks after a cut: between events, dropped
        buf += data
        if not tried and buf[1:2].isspace():  # blanks after a cut are between events: dropped
            text_at = _TEXT.search(buf, 1)
            del buf[1 : text_at.start() if text_at else len(buf)]
        tried = _decode_to_last_cut(buf, tried, parts, threads)
        if not tried and not _TEXT.search(buf, len(buf) - _BLANK_RUN):  # blanks at the end
            _cut_before_blanks(buf, parts, threads)
    end, last = _array_end(buf, threads)
    if end < 0:
        return None
    suffix = bytes(buf[end + 1 :]) + text.read()  # the keys after the array: small
    if last is not None:
        parts.append(last)
    del buf
    if not parts:  # an empty array: the one-piece reader says so
        return None
    header = TRACE_DECODER.decode(prefix + _KEY + b":[]" + suffix)
    return DecodedParts(header=header, raw=merge(parts))
