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
import itertools
import json
import math
import os
import re
from collections.abc import Sequence
from enum import Enum
from typing import Any

import msgspec
import numpy as np


class Encoded:
    """A value in a document given to `dumps` with its text (as `dumps(value)` writes it, or
    that text's consecutive pieces), which `dumps` puts in place, indented to where the value
    sits; `plain` gives the value's. (Not a dataclass: msgspec would write one as an object of
    its fields.)"""

    __slots__ = ("value", "parts", "indent")

    def __init__(self, value: Any, text: str | Sequence[str], indent: int = 0) -> None:
        self.value = value
        self.parts = [text] if isinstance(text, str) else list(text)
        self.indent = indent  # `encode_at`'s: the depth the text was indented for

    @property
    def text(self) -> str:
        return "".join(self.parts)


def encoded(value: Any) -> Any:
    """`value` as `Encoded` where it is `Records` (for a document's field), else itself."""
    if isinstance(value, Records):
        return Encoded(value, value.text_parts, value.indent)
    return value


def encode_at(value: Any, indent: int) -> str:
    """`dumps(value)` as it reads inside a document where the value's line starts `indent`
    spaces deep: every line after the first indented by that much."""
    return _indented(dumps(value), indent)


def _indented(text: str, indent: int) -> str:
    return text.replace("\n", "\n" + " " * indent) if indent else text


@dataclasses.dataclass(frozen=True)
class MicrosOfNs:
    """A column of whole nanoseconds (int64) that a record list holds as µs floats (`ns / 1000`)."""

    ns: np.ndarray


@dataclasses.dataclass(frozen=True)
class Coded:
    """A column that takes few values: per record, an index into `values`."""

    codes: np.ndarray
    values: Sequence[Any]


# the largest |ns| whose µs float has at most 15 significant digits: `repr` writes it as the
# decimal itself (a double holds any 15-digit decimal exactly enough to give it back), positional
_EXACT_NS = 10**15
# `repr(k / 1000)` after the "0" of its integer part, for k in 0..999 (".0", ".001", ".5" ...)
_FRACTIONS = np.array([repr(k / 1000)[1:] for k in range(1000)], dtype=object)


def records_text(fields: Sequence[tuple[str, MicrosOfNs | Coded]], n: int, indent: int = 0) -> str:
    """`encode_at([{name: value, ...} for each of n records], indent)`, written from columns
    without a dict per record: a `MicrosOfNs` value as `repr(ns / 1000)` writes it (integer part
    and the fraction's digits, since the float holds the decimal exactly: at most 15 digits), the
    distinct combinations of consecutive `Coded` values (scalars) written once each and then
    looked up. Falls back to `encode_at` on the records where a value has more digits."""
    if n == 0:
        return "[]"
    if not in_parts(fields):
        return encode_at(records(fields, n), indent)
    return "".join(records_enclosed([records_body(fields, n, indent)], indent))


def in_parts(fields: Sequence[tuple[str, MicrosOfNs | Coded]]) -> bool:
    """Whether `records_body` can write these columns (every µs value exact in 15 digits), so
    that their text may be written a slice of records at a time (`sliced`)."""
    return not any(
        isinstance(c, MicrosOfNs) and len(c.ns) and np.abs(c.ns).max() >= _EXACT_NS
        for _, c in fields
    )


def sliced(
    fields: Sequence[tuple[str, MicrosOfNs | Coded]], lo: int, hi: int
) -> list[tuple[str, MicrosOfNs | Coded]]:
    """The columns of records lo..hi-1."""
    return [
        (
            name,
            MicrosOfNs(c.ns[lo:hi])
            if isinstance(c, MicrosOfNs)
            else Coded(c.codes[lo:hi], c.values),
        )
        for name, c in fields
    ]


def records_enclosed(bodies: Sequence[str], indent: int = 0) -> list[str]:
    """`records_text` of consecutive slices of records from their `records_body` texts, as
    pieces to put end to end (not joined: the document they go in is)."""
    first = next((k for k, b in enumerate(bodies) if b), None)
    if first is None:
        return ["[]"]
    return ["[", bodies[first][1:], *bodies[first + 1 :], "\n" + " " * indent + "]"]


def records_body(fields: Sequence[tuple[str, MicrosOfNs | Coded]], n: int, indent: int = 0) -> str:
    """The text of n records (`in_parts` columns) as `records_text` writes them inside its
    brackets, each led by its comma: the texts of consecutive slices put end to end are that of
    all (`records_enclosed`)."""
    if n == 0:
        return ""
    inner, deeper = "\n" + " " * (indent + 1), "\n" + " " * (indent + 2)
    columns: list = []  # each a str (the same for every record) or a list of n str
    prefix = "," + inner + "{"
    k = 0
    while k < len(fields):
        if isinstance(fields[k][1], MicrosOfNs):
            name, col = fields[k]
            last = k == len(fields) - 1
            ns = col.ns.astype(np.int64)
            columns.append(f"{prefix}{deeper}{_scalar(name)}: ")
            if (ns < 0).any():
                columns.append(np.where(ns < 0, "-", "").astype(object).tolist())
            whole, frac = np.divmod(np.abs(ns), 1000)
            columns.append(list(map(str, whole.tolist())))
            columns.append(_FRACTIONS[frac].tolist())
            prefix = "" if last else ","
            k += 1
            continue
        group = []  # consecutive coded fields: one lookup
        while k < len(fields) and isinstance(fields[k][1], Coded):
            group.append(fields[k])
            k += 1
        codes = [np.asarray(c.codes, np.int64) for _, c in group]
        key = np.zeros(n, np.int64)  # one number per combination (kept small by renumbering)
        for (_, c), code in zip(group, codes):
            if int(key.max()) >= (1 << 62) // max(len(c.values), 1):
                key = np.unique(key, return_inverse=True)[1].ravel().astype(np.int64)
            key = key * len(c.values) + code
        _, first, which = np.unique(key, return_index=True, return_inverse=True)
        rows = np.stack([code[first] for code in codes], axis=1)
        last = k == len(fields)
        lines: list[dict[int, str]] = [{} for _ in group]  # per field: each value's line, once
        texts = np.array(
            [
                prefix
                + ",".join(
                    line[v]
                    if v in line
                    else line.setdefault(v, f"{deeper}{_scalar(name)}: {_scalar(c.values[v])}")
                    for (name, c), line, v in zip(group, lines, row)
                )
                + ("" if last else ",")
                for row in rows.tolist()
            ],
            dtype=object,
        )
        columns.append(texts[which.ravel()].tolist())
        prefix = ""
    columns.append(inner + "}")
    merged: list = []  # adjacent constants as one
    for c in columns:
        if isinstance(c, str) and merged and isinstance(merged[-1], str):
            merged[-1] += c
        else:
            merged.append(c)
    parts = [itertools.repeat(c, n) if isinstance(c, str) else c for c in merged]
    return "".join(itertools.chain.from_iterable(zip(*parts)))


def _scalar(value: Any) -> str:
    """`dumps(value)` for a string, number, boolean or None (Python's own encoder: one value)."""
    value = plain(value)
    if isinstance(value, (dict, list)):
        raise TypeError("a coded column's values are scalars")
    return "null" if value is None else json.dumps(value)


def records(fields: Sequence[tuple[str, MicrosOfNs | Coded]], n: int) -> list[dict]:
    """The `n` records `records_text` writes, as dicts."""
    values = [
        (c.ns / 1000).tolist()
        if isinstance(c, MicrosOfNs)
        else [c.values[v] for v in np.asarray(c.codes).tolist()]
        for _, c in fields
    ]
    names = [name for name, _ in fields]
    return [dict(zip(names, row)) for row in zip(*values)] if values else [{} for _ in range(n)]


class Records(Sequence):
    """A list of records held as their columns (`records_text`'s fields): its dicts are made when
    first read, its text (as `encode_at(records, indent)` writes it) when first asked for or
    where given (made in worker processes: whole, or as consecutive pieces). Equal to a list of
    the same dicts; pickled as its columns (compact; the text is not sent)."""

    __slots__ = ("fields", "n", "indent", "_text", "_parts", "_items")

    def __init__(
        self,
        fields: Sequence[tuple[str, MicrosOfNs | Coded]],
        n: int,
        indent: int = 0,
        text: str | Sequence[str] | None = None,
    ) -> None:
        self.fields, self.n, self.indent = tuple(fields), n, indent
        self._parts = None if text is None or isinstance(text, str) else list(text)
        self._text = text if isinstance(text, str) else None
        self._items = None

    @property
    def text(self) -> str:
        if self._text is None:
            if self._parts is not None:
                self._text = "".join(self._parts)
            else:
                self._text = records_text(self.fields, self.n, self.indent)
        return self._text

    @property
    def text_parts(self) -> list[str]:
        """The text as consecutive pieces (as given; else the whole text, one piece)."""
        return self._parts if self._parts is not None and self._text is None else [self.text]

    @property
    def items(self) -> list[dict]:
        if self._items is None:
            self._items = records(self.fields, self.n)
        return self._items

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k):
        return self.items[k]

    def __iter__(self):
        return iter(self.items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Records):
            other = other.items
        return self.items == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # a list's: unhashable

    def __repr__(self) -> str:
        return f"Records({self.items!r})"

    def __reduce__(self):
        return (Records, (self.fields, self.n, self.indent))


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
    if isinstance(value, (list, tuple, Records)):
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
    if isinstance(value, Records):
        return value.items
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
    """`json.dumps(plain(doc), indent=1)`: `dumps_pieces` joined."""
    return "".join(dumps_pieces(doc, end))


def dumps_pieces(doc: Any, end: str = "") -> list[str]:
    """`json.dumps(plain(doc), indent=1)` as pieces that follow one another (a long document is
    written without joining it into one string first), written in C: msgspec encodes (non-finite
    floats as `null`, enums as their values, numpy scalars and arrays through `_hook`) and
    indents, and the two places where its text differs from Python's are put back: floats with
    an exponent or below 1e-4 as `repr(float)` writes them (`1e+16`, `9e-05`), and characters
    outside printable ASCII as `\\uXXXX` escapes (`ensure_ascii`). An `Encoded` value's text is
    put in as it is, each of its lines indented as deep as the line the value starts on (less
    what `encode_at` indented).
    `end` follows the text (a document's last newline)."""
    texts: list[tuple[Any, list[str], int]] = []
    marker = f"\x00tpscope-encoded-{os.urandom(8).hex()}-"

    def hook(value: Any) -> Any:
        if isinstance(value, Encoded):  # a placeholder string, replaced below
            texts.append((value.value, value.parts, value.indent))
            return f"{marker}{len(texts) - 1}"
        return _hook(value)

    try:
        raw = msgspec.json.Encoder(enc_hook=hook).encode(doc)
    except UnicodeEncodeError:  # a lone surrogate: a file name's bytes that are not UTF-8
        texts.clear()
        raw = _ENCODER.encode(_encodable(plain(doc)))
    if not texts:
        return [_fixed(msgspec.json.format(raw, indent=1), end)]
    text = _fixed(msgspec.json.format(raw, indent=1))
    quoted = '"' + marker.replace("\x00", "\\u0000")
    pieces, done = [], 0
    for k, (value, parts, made_at) in enumerate(texts):
        at = text.index(f'{quoted}{k}"', done)
        depth = _indent_of(text, at)
        pieces.append(text[done:at])
        if depth == made_at:  # as it sits here: its pieces put in as they are
            pieces += parts
        elif depth > made_at:
            pieces.append(_indented("".join(parts), depth - made_at))
        else:  # indented deeper than it sits here: written again
            pieces.append(_indented(dumps(value), depth))
        done = at + len(quoted) + len(str(k)) + 1
    pieces += [text[done:], end]
    return pieces


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
