"""Results as JSON: the one converter behind every JSON document tpscope writes (`tpscope analyze
--json`, `tpscope report --format json`) and the dashboard's rows (metrics.md §10). `plain` turns a
result into plain values; `dumps` writes a result's text by the same rule without walking it in
Python (msgspec encodes and indents in C), character for character `json.dumps(plain(doc), indent=1)`.

The rule, applied at every depth: a dataclass is an object of its fields in declaration order; an
enum is its value; a dict is an object with `str` keys; a list, tuple or array is a list; a numpy
scalar is the Python number; a float that is not finite (NaN, ±inf) is `null`, never 0 and never
the non-standard `NaN`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from enum import Enum
from typing import Any

import msgspec
import numpy as np


def plain(value: Any) -> Any:
    """`value` as nested dicts, lists, strings, numbers, booleans and None (the rule above)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# A number alone on its line (a raw newline never occurs inside a JSON string), in a form where
# msgspec and repr() differ: with an exponent, or positional below 1e-4.
_FLOAT = re.compile(rb"(?<= )(-?\d+(?:\.\d+)?e[+-]?\d+|-?0\.0000\d*)(?=,?\n)")
_SMALL = re.compile(rb"0\.0000")
_NOT_ASCII = re.compile(r"[^\x00-\x7e]")  # msgspec has escaped the controls below 0x20 already


def _hook(value: Any) -> Any:
    """What msgspec cannot encode by itself, by the rule above."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise NotImplementedError(f"cannot write {type(value).__name__} as JSON")


_ENCODER = msgspec.json.Encoder(enc_hook=_hook)


def _encodable(value: Any) -> Any:
    """A plain document with every string (keys too) as `text.displayable` writes it."""
    from tpscope.text import displayable

    if isinstance(value, str):
        return displayable(value)
    if isinstance(value, dict):
        return {displayable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    return value


def _escape(m: re.Match) -> str:
    code = ord(m.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


_BLOCK_BYTES = 1 << 22  # numpy's temporaries for a block stay in the heap, not fresh pages


def _differing_lines(text: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line of `text` where msgspec's JSON may differ from Python's: a byte
    outside printable ASCII, or a `_FLOAT` candidate (a digit, `e` and a digit or sign, or
    `0.0000`). Found with numpy, a block at a time: most documents have none, and a match never
    spans lines (a raw newline never occurs inside a JSON string)."""
    b = np.frombuffer(text, np.uint8)
    if len(b) < 3:
        return [(0, len(b))] if len(b) else []
    hits = [np.array([m.start() for m in _SMALL.finditer(text)], np.int64)]
    ascii_ = text.isascii() and text.find(b"\x7f") < 0
    for lo in range(0, len(b), _BLOCK_BYTES):
        # the block and one byte each side: an "e" at lo..hi-1 sees its neighbours
        first = max(lo - 1, 0)
        w = b[first : min(lo + _BLOCK_BYTES + 1, len(b))]
        digit = (w >= ord("0")) & (w <= ord("9"))
        sign = (w[2:] == ord("-")) | (w[2:] == ord("+"))
        hits.append(
            np.flatnonzero((w[1:-1] == ord("e")) & digit[:-2] & (digit[2:] | sign)) + 1 + first
        )
        if not ascii_:
            hits.append(np.flatnonzero(b[lo : lo + _BLOCK_BYTES] >= 0x7F) + lo)
    lines = []
    for pos in np.unique(np.concatenate(hits)).tolist():
        if lines and pos < lines[-1][1]:
            continue  # on the line found last
        start = text.rfind(b"\n", 0, pos) + 1
        end = text.find(b"\n", pos)
        lines.append((start, len(text) if end < 0 else end + 1))
    return lines


def _repr_float(m: re.Match) -> bytes:
    return repr(float(m.group())).encode()


def dumps(doc: Any) -> str:
    """`json.dumps(plain(doc), indent=1)`, written in C: msgspec encodes (non-finite floats as
    `null`, enums as their values, numpy scalars and arrays through `_hook`) and indents, and the two
    places where its text differs from Python's are put back: floats with an exponent or below 1e-4
    as `repr(float)` writes them (`1e+16`, `9e-05`), and characters outside printable ASCII as
    `\\uXXXX` escapes (`ensure_ascii`)."""
    try:
        raw = _ENCODER.encode(doc)
    except UnicodeEncodeError:  # a lone surrogate: a file name's bytes that are not UTF-8
        raw = _ENCODER.encode(_encodable(plain(doc)))
    text = msgspec.json.format(raw, indent=1)
    pieces, done = [], 0
    for lo, hi in _differing_lines(text):
        line = _FLOAT.sub(_repr_float, text[lo:hi]).decode()
        pieces += [text[done:lo].decode(), _NOT_ASCII.sub(_escape, line)]
        done = hi
    pieces.append(text[done:].decode())
    return "".join(pieces)
