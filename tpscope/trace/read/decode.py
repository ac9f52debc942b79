"""Bytes of one trace file -> a `TraceFile` of typed events.

The fast path decodes straight into the structs of `schema.py`. A file that breaks their types
(a string where a number belongs, an integer past 64 bits) is decoded again untyped and its
events converted one by one, dropping the ones that cannot be read, with a warning.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgspec

from tpscope.errors import TraceError
from tpscope.trace.read import cut
from tpscope.trace.read.schema import Args, Event, TraceFile

GZIP_MAGIC = b"\x1f\x8b"
try:  # ISA-L's inflate is about 1.5x zlib's on Kineto traces (docs/benchmarks.md)
    from isal import igzip as _igzip
    from isal.isal_zlib import error as _IsalError

    _gunzip = _igzip.decompress
except ImportError:  # pragma: no cover - isal is a dependency; zlib keeps working without it
    _gunzip = gzip.decompress
    _IsalError = zlib.error
# what a broken gzip stream raises, whichever inflater reads it
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, _IsalError)
TRACE_DECODER = msgspec.json.Decoder(TraceFile)  # a whole file into the structs of schema.py
EVENTS_DECODER = msgspec.json.Decoder(list[Event])  # a bare array of events


def decode_run(text, lo: int, stop: int, hi: int) -> tuple[list, int] | None:
    """msgspec's events of `text[lo:stop]` (whole events separated by commas) and where that run
    ends: where the run is not valid JSON (a cut inside an event: a nested "}, {"), it grows by a
    quarter, to a later event boundary (`cut.py`), up to `hi`, as the C reader's chunks do. None
    where the text itself is not valid or well typed."""
    with memoryview(text) as view:
        while True:
            try:
                return _decode_in_place(text, view, lo, stop), stop
            except msgspec.DecodeError:
                if stop >= hi:
                    return None
            except (msgspec.ValidationError, RecursionError):
                return None
            want = min(hi, stop + (stop - lo) // 4 + 1)
            at = cut.last_cut(text, stop + 1, want)
            at = at if at > stop else cut.first_cut(text, want, hi)
            stop = hi if at < 0 else at


def _decode_in_place(text, view: memoryview, lo: int, stop: int) -> list:
    """msgspec's events of `text[lo:stop]`: in place between a "[" and a "]" written over the
    bytes around it (a comma, a blank or a bracket) where `text` is a bytearray, else a copy."""
    if not isinstance(text, bytearray) or lo < 1 or stop >= len(text):
        array = bytearray(stop - lo + 2)
        array[0], array[1:-1], array[-1] = ord("["), view[lo:stop], ord("]")
        return EVENTS_DECODER.decode(array)
    before, after = text[lo - 1], text[stop]
    text[lo - 1], text[stop] = ord("["), ord("]")
    try:
        return EVENTS_DECODER.decode(view[lo - 1 : stop + 1])
    finally:
        text[lo - 1], text[stop] = before, after


@dataclass(frozen=True, slots=True)
class DecodedTrace:
    """A decoded file and what was wrong with it but did not stop it."""

    trace: TraceFile
    warnings: tuple[str, ...]


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by its magic number, not its name)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a folder, not a trace file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot be read ({exc.strerror or exc})") from None
    return gunzip(path, raw)


def gunzip(path: object, raw: bytes) -> bytes:
    """`raw` gunzipped when it is gzip (by its magic number), else as it is."""
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:
        return _gunzip(raw)
    except GZIP_ERRORS as exc:
        raise TraceError(path, f"broken gzip data (truncated or corrupt: {exc})") from None


# year 2116 in ns since the epoch; past it, times leave int64 (metrics.md §1)
MAX_BASE_TIME_NS = 2**62


def base_time_ns(path: Path, trace: TraceFile) -> int:
    """The trace's `baseTimeNanoseconds` (0 when absent); one past int64's safe range is refused."""
    base = trace.baseTimeNanoseconds
    if base is None:
        return 0
    if (
        not isinstance(base, int)
        or isinstance(base, bool)
        or not -MAX_BASE_TIME_NS <= base <= MAX_BASE_TIME_NS
    ):
        raise TraceError(
            path, f"baseTimeNanoseconds {str(base)[:30]} is out of range (|value| <= 2^62 ns)"
        )
    return base


def decode_trace(path: Path, data: bytes | None = None) -> DecodedTrace:
    """Decode one trace file (plain or gzipped JSON) into typed events."""
    try:
        return _decode(path, data)
    except RecursionError:  # msgspec and json give up on deep nesting; no trace nests that deep
        raise TraceError(path, "JSON nested too deeply to be a Kineto trace") from None


def _decode(path: Path, data: bytes | None) -> DecodedTrace:
    if data is None:
        data = read_bytes(path)
    if not data.strip():
        raise TraceError(path, "empty file")
    try:
        return DecodedTrace(TRACE_DECODER.decode(data), ())
    except msgspec.ValidationError:
        return _decode_tolerant(path, _untyped(path, data))
    except msgspec.DecodeError as exc:
        first_error = exc
    # Not JSON as msgspec reads it. Three things are still worth a try: a bare list of events,
    # invalid UTF-8 in names (replaced, with a warning), and NaN/Infinity literals (Python's json).
    if data.lstrip()[:1] == b"[":
        try:
            return DecodedTrace(TraceFile(traceEvents=EVENTS_DECODER.decode(data)), ())
        except msgspec.ValidationError:
            return _decode_tolerant(path, _untyped(path, data))
        except msgspec.DecodeError:
            pass
    if "UTF-8" in str(first_error):
        fixed = data.decode("utf-8", errors="replace").encode()
        decoded = _decode(path, fixed)
        note = f"{path}: invalid UTF-8 bytes replaced by U+FFFD"
        return DecodedTrace(decoded.trace, (note, *decoded.warnings))
    fixed = replace_lone_surrogates(data)
    if fixed is not data:
        decoded = _decode(path, fixed)
        note = f"{path}: lone UTF-16 surrogate escapes replaced by U+FFFD"
        return DecodedTrace(decoded.trace, (note, *decoded.warnings))
    if b"NaN" in data or b"Infinity" in data:
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            pass
        else:
            return _decode_tolerant(path, doc, note="NaN or Infinity values")
    raise TraceError(path, f"not valid JSON ({first_error})")


# an escaped backslash, a valid surrogate pair, or a lone surrogate escape (valid JSON that no
# UTF-8 text can hold), matched left to right: in "\\\\ud800" the backslash is escaped
_ESCAPES = re.compile(
    rb"(\\\\)|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)


def replace_lone_surrogates(data: bytes) -> bytes:
    """`data` with each lone UTF-16 surrogate escape (`\\ud800`) written as `\\ufffd`; `data`
    itself (the same object) when it has none."""
    if b"\\u" not in data:
        return data
    found = False

    def fix(m: re.Match) -> bytes:
        nonlocal found
        if m.group(3) is None:
            return m.group(0)
        found = True
        return rb"\ufffd"

    fixed = _ESCAPES.sub(fix, data)
    return fixed if found else data


def _untyped(path: Path, data: bytes) -> object:
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from None


# the arguments the schema keeps as their JSON text (msgspec.Raw), by their names in the trace
_RAW_ARG_KEYS = tuple(f.encode_name for f in msgspec.structs.fields(Args) if f.type is msgspec.Raw)


def _with_raw(obj: dict, keys: tuple[str, ...]) -> dict:
    """The fields that the schema keeps as undecoded JSON (msgspec.Raw), encoded back."""
    if not any(k in obj for k in keys):
        return obj
    # written back as Kineto and Python's json write them (", " between items), as the typed
    # decoder keeps the text
    return {k: (msgspec.Raw(_json_text(v)) if k in keys else v) for k, v in obj.items()}


def _json_text(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def _decode_tolerant(path: Path, doc: object, note: str = "unusual field types") -> DecodedTrace:
    """Convert an untyped document event by event, dropping what cannot be read."""
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents", []), list):
        raise TraceError(path, "not a Kineto trace (no traceEvents list)")
    raw_events = doc.pop("traceEvents", [])
    header = {k: doc[k] for k in ("distributedInfo", "baseTimeNanoseconds", "hostname") if k in doc}
    if isinstance(header.get("distributedInfo"), dict):
        header["distributedInfo"] = _with_raw(header["distributedInfo"], ("pg_config",))
    warnings: list[str] = []
    try:
        trace = msgspec.convert(header, TraceFile, strict=False)
    except msgspec.ValidationError as exc:
        warnings.append(f"{path}: header fields ignored ({exc})")
        trace = TraceFile()
    events: list[Event] = []
    dropped = 0
    for raw in raw_events:
        if isinstance(raw, dict) and isinstance(raw.get("args"), dict):
            raw = {**raw, "args": _with_raw(raw["args"], _RAW_ARG_KEYS)}
        try:
            events.append(msgspec.convert(raw, Event, strict=False))
        except msgspec.ValidationError:
            try:  # keep the event if only its args are odd
                if isinstance(raw, dict):
                    raw = {k: v for k, v in raw.items() if k != "args"}
                events.append(msgspec.convert(raw, Event, strict=False))
            except msgspec.ValidationError:
                dropped += 1
    if dropped:
        warnings.append(f"{path}: {dropped} events could not be read and were dropped")
    else:
        warnings.append(f"{path}: {note}; read with the tolerant decoder")
    trace.traceEvents = events
    return DecodedTrace(trace, tuple(warnings))
