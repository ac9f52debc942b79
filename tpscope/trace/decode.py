"""Bytes of one trace file -> a `TraceFile` of typed events.

The fast path decodes straight into the structs of `schema.py`. A file that breaks their types
(a string where a number belongs, an integer past 64 bits) is decoded again untyped and its
events converted one by one, dropping the ones that cannot be read, with a warning.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgspec

from tpscope.errors import TraceError
from tpscope.trace.schema import Event, TraceFile

_GZIP_MAGIC = b"\x1f\x8b"
_typed_decoder = msgspec.json.Decoder(TraceFile)
_list_decoder = msgspec.json.Decoder(list[Event])


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
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(path, f"broken gzip data (truncated or corrupt: {exc})") from None


def decode_trace(path: Path, data: bytes | None = None) -> DecodedTrace:
    """Decode one trace file (plain or gzipped JSON) into typed events."""
    if data is None:
        data = read_bytes(path)
    if not data.strip():
        raise TraceError(path, "empty file")
    try:
        return DecodedTrace(_typed_decoder.decode(data), ())
    except msgspec.ValidationError:
        pass  # valid JSON whose types differ from the usual: take the tolerant path
    except msgspec.DecodeError as exc:
        if data.lstrip()[:1] == b"[":
            try:
                return DecodedTrace(TraceFile(traceEvents=_list_decoder.decode(data)), ())
            except msgspec.ValidationError:
                pass
            except msgspec.DecodeError:
                raise TraceError(path, f"not valid JSON ({exc})") from None
        else:
            raise TraceError(path, f"not valid JSON ({exc})") from None
    return _decode_tolerant(path, data)


def _decode_tolerant(path: Path, data: bytes) -> DecodedTrace:
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from None
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents", []), list):
        raise TraceError(path, "not a Kineto trace (no traceEvents list)")
    raw_events = doc.pop("traceEvents", [])
    header = {k: doc[k] for k in ("distributedInfo", "baseTimeNanoseconds", "hostname") if k in doc}
    warnings: list[str] = []
    try:
        trace = msgspec.convert(header, TraceFile, strict=False)
    except msgspec.ValidationError as exc:
        warnings.append(f"{path}: header fields ignored ({exc})")
        trace = TraceFile()
    events: list[Event] = []
    dropped = 0
    for raw in raw_events:
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
        warnings.append(f"{path}: unusual field types; read with the tolerant decoder")
    trace.traceEvents = events
    return DecodedTrace(trace, tuple(warnings))
