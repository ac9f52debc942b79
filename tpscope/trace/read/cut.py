"""Where one event of the `traceEvents` array ends and the next begins: the one rule every way of
reading a file cuts its text by (stream chunks, forked parts, thread spans; the C reader's chunks
follow it too, `last_cut` in _event_columns.c).

An event boundary is "}", blanks, ",", blanks, "{" (Kineto writes `},\\n  {`, Python's json
`}, {`, a compact writer `},{`). The same characters inside a string or a nested object are no
boundary; a cut there leaves the text before it with an unclosed string or bracket, which no JSON
reader accepts: every reader validates what it is given, so a wrong cut is never silently wrong.
A reader then cuts later (a longer chunk), or reads the file another way.
"""

from __future__ import annotations

import re

EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_TAIL_SEARCH = 1 << 20  # the last MiB is searched first: cuts are wanted near a chunk's end


def _comma(buf: bytes | bytearray | memoryview, m: re.Match) -> int:
    return m.start() + bytes(buf[m.start() : m.end()]).index(b",")


def first_cut(buf: bytes | bytearray, lo: int, hi: int) -> int:
    """Index of the comma of the first event boundary that starts in `buf[lo:hi]`, or -1. A
    boundary found in a prefix of the text is the one the whole text gives (its match ends at
    its `{`)."""
    m = EVENT_BOUNDARY.search(buf, lo, hi)
    return -1 if m is None else _comma(buf, m)


def last_cut(buf: bytes | bytearray, lo: int, hi: int) -> int:
    """Index of the comma of the last event boundary in `buf[lo:hi]`, or -1."""
    for start in (max(lo, hi - _TAIL_SEARCH), lo):
        last = None
        for last in EVENT_BOUNDARY.finditer(buf, start, hi):  # noqa: B007 - the last is wanted
            pass
        if last is not None:
            return _comma(buf, last)
        if start == lo:
            break
    return -1


def spans(buf: bytes | bytearray, lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """`buf[lo:hi]` (events separated by commas) cut at the first event boundary after each n-th
    of its length: at most `n` runs of whole events, the commas between them left out."""
    out, start = [], lo
    for k in range(1, n):
        comma = first_cut(buf, max(start, lo + (hi - lo) * k // n), hi)
        if comma < 0:
            break
        out.append((start, comma))
        start = comma + 1
    return [*out, (start, hi)]
