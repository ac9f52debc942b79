"""The text of `tpscope analyze --json`, written fast.

The document is `json.dumps(as_json(analysis), indent=1)`, character for character. Python's
encoder walks it in Python when it indents (seconds for the tens of MB of a big run's critical
path); here msgspec encodes the dataclasses and indents in C, and the two places where its text
differs from Python's are put back: floats in exponent form or below 1e-4 are written as
`repr(float)` writes them (`1e+16`, `9e-05`), and characters outside printable ASCII as `\\uXXXX`
escapes (`ensure_ascii`). Non-finite floats are `null`, as `as_json` makes them.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np

from tpscope.metrics.analysis import RunAnalysis, json_fields

# A number alone on its line (a raw newline never occurs inside a JSON string), in a form where
# msgspec and repr() differ: with an exponent, or positional below 1e-4
_FLOAT = re.compile(rb"(?<= )(-?\d+(?:\.\d+)?e[+-]?\d+|-?0\.0000\d*)(?=,?\n)")
_EXPONENT = re.compile(rb"\de[-+\d]")  # quicker scans first (most documents need no change)
_NOT_ASCII = re.compile(r"[^\x00-\x7e]")  # msgspec has escaped the controls below 0x20 already


def _hook(value):
    if isinstance(value, np.generic):
        return value.item()
    raise NotImplementedError(f"cannot write {type(value).__name__} as JSON")


_ENCODER = msgspec.json.Encoder(enc_hook=_hook)


def _escape(m: re.Match) -> str:
    code = ord(m.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def dumps(doc: object) -> str:
    """`json.dumps(doc, indent=1)` for a document of dataclasses, dicts with string keys, lists,
    strings, ints, floats (non-finite ones as `null`) and numpy scalars."""
    text = msgspec.json.format(_ENCODER.encode(doc), indent=1)
    if text.find(b"0.0000") >= 0 or _EXPONENT.search(text):
        text = _FLOAT.sub(lambda m: repr(float(m.group())).encode(), text)
    text = text.decode()
    return text if text.isascii() and "\x7f" not in text else _NOT_ASCII.sub(_escape, text)


def analysis_text(analysis: RunAnalysis) -> str:
    """The JSON text of `tpscope analyze --json` for one run (no trailing newline)."""
    return dumps(json_fields(analysis))
