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
import os
import re
from enum import Enum
from typing import Any

import msgspec
import numpy as np


class EncodedList(list):
    """A list that carries its own text as `dumps` writes it (`text`: made where the list was
    made, e.g. in a worker process, so that writing a document that holds it only copies the
    text in; `encode_at`: for a list whose line starts `indent` spaces deep). Pickled as a plain
    list: the text does not travel into a cache."""

    __slots__ = ("text", "indent")

    def __init__(self, items, text: str, indent: int = 0) -> None:
        super().__init__(items)
        self.text = text
        self.indent = indent

    def __reduce__(self):
        return (list, (list(self),))


class Encoded:
    """A value in a document given to `dumps` with its text (as `dumps(value)` writes it), which
    `dumps` puts in place, indented to where the value sits; `plain` gives the value's. (Not a
    dataclass: msgspec would write one as an object of its fields.)"""

    __slots__ = ("value", "text", "indent")

    def __init__(self, value: Any, text: str, indent: int = 0) -> None:
        self.value = value
        self.text = text
        self.indent = indent  # `encode_at`'s: the depth the text was indented for


def encoded(value: Any) -> Any:
    """`value` as `Encoded` where it is an `EncodedList` (for a document's field), else itself."""
    if isinstance(value, EncodedList):
        return Encoded(value, value.text, value.indent)
    return value


def encode_at(value: Any, indent: int) -> str:
    """`dumps(value)` as it reads inside a document where the value's line starts `indent`
    spaces deep: every line after the first indented by that much."""
    return _indented(dumps(value), indent)


def _indented(text: str, indent: int) -> str:
    return text.replace("\n", "\n" + " " * indent) if indent else text


def plain(value: Any) -> Any:
    """`value` as nested dicts, lists, strings, numbers, booleans and None (the rule above)."""
    if isinstance(value, Encoded):
        return plain(value.value)
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


def dumps(doc: Any, end: str = "") -> str:
    """`json.dumps(plain(doc), indent=1)`, written in C: msgspec encodes (non-finite floats as
    `null`, enums as their values, numpy scalars and arrays through `_hook`) and indents, and the two
    places where its text differs from Python's are put back: floats with an exponent or below 1e-4
    as `repr(float)` writes them (`1e+16`, `9e-05`), and characters outside printable ASCII as
    `\\uXXXX` escapes (`ensure_ascii`). An `Encoded` value's text is put in as it is, each of its
    lines indented as deep as the line the value starts on (less what `encode_at` indented).
    `end` follows the text (a document's last newline, without copying the text once more)."""
    texts: list[tuple[Any, str, int]] = []
    marker = f"\x00tpscope-encoded-{os.urandom(8).hex()}-"

    def hook(value: Any) -> Any:
        if isinstance(value, Encoded):  # a placeholder string, replaced below
            texts.append((value.value, value.text, value.indent))
            return f"{marker}{len(texts) - 1}"
        return _hook(value)

    try:
        raw = msgspec.json.Encoder(enc_hook=hook).encode(doc)
    except UnicodeEncodeError:  # a lone surrogate: a file name's bytes that are not UTF-8
        texts.clear()
        raw = _ENCODER.encode(_encodable(plain(doc)))
    if not texts:
        return _fixed(msgspec.json.format(raw, indent=1), end)
    text = _fixed(msgspec.json.format(raw, indent=1))
    quoted = '"' + marker.replace("\x00", "\\u0000")
    pieces, done = [], 0
    for k, (value, part, made_at) in enumerate(texts):
        at = text.index(f'{quoted}{k}"', done)
        depth = _indent_of(text, at)
        if depth < made_at:  # indented deeper than it sits here: written again
            part, made_at = dumps(value), 0
        pieces += [text[done:at], _indented(part, depth - made_at)]
        done = at + len(quoted) + len(str(k)) + 1
    pieces += [text[done:], end]
    return "".join(pieces)


def _indent_of(text: str, at: int) -> int:
    """The spaces that begin the line of `text` holding position `at`."""
    start = text.rfind("\n", 0, at) + 1
    line = text[start:at]
    return len(line) - len(line.lstrip(" "))


def _fixed(text: bytes, end: str = "") -> str:
    """msgspec's indented `text` as Python's `json.dumps` writes it (see `dumps`), `end` after."""
    pieces, done = [], 0
    for lo, hi in _differing_lines(text):
        line = _FLOAT.sub(_repr_float, text[lo:hi]).decode()
        pieces += [text[done:lo].decode(), _NOT_ASCII.sub(_escape, line)]
        done = hi
    pieces.append(text[done:].decode())
    if end:
        pieces.append(end)
    return "".join(pieces)
