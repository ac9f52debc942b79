"""Small helpers that turn lists of Python values into typed numpy columns, and look times up
in intervals."""

from __future__ import annotations

import numpy as np

MISSING = -1  # integer columns hold -1 where the trace has no value
_INT64_MAX = np.iinfo(np.int64).max


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """`np.unique(values)` by a sort: numpy's hash-based unique (2.3 and later) takes many times
    longer on wide-ranging integers such as times (0.3 s for 400,000 of them)."""
    s = np.sort(np.asarray(values).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def unique_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)` of integer ids (names' symbol ids, -1 for none),
    by a table over their range where it is small (one pass, no sort); else by `np.unique`."""
    v = np.asarray(values).ravel()
    if len(v) == 0 or v.dtype.kind not in "iu":
        u, inverse = np.unique(v, return_inverse=True)
        return u, inverse.ravel()
    lo, hi = int(v.min()), int(v.max())
    if hi - lo > 4 * len(v) + 1024:  # a sparse range: the table would be the larger
        u, inverse = np.unique(v, return_inverse=True)
        return u, inverse.ravel()
    shifted = (v - lo).astype(np.intp)
    present = np.zeros(hi - lo + 1, bool)
    present[shifted] = True
    rank = np.cumsum(present, dtype=np.intp) - 1
    return (np.flatnonzero(present) + lo).astype(v.dtype), rank[shifted]


def int_column(values: list) -> np.ndarray:
    """int64 column; None, non-numeric strings and integers past 64 bits become -1."""
    try:
        return np.array([MISSING if v is None else v for v in values], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((as_int(v) for v in values), dtype=np.int64, count=len(values))


def as_int(v: object) -> int:
    if isinstance(v, bool) or v is None:
        return MISSING
    if isinstance(v, int):
        return v if -_INT64_MAX <= v <= _INT64_MAX else MISSING
    if isinstance(v, float):
        return int(v) if np.isfinite(v) and abs(v) < 2**62 else MISSING
    if isinstance(v, str):
        try:
            return as_int(int(v))
        except ValueError:
            return MISSING
    return MISSING


def float_column(values: list) -> np.ndarray:
    """float64 column; None and non-numbers become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.fromiter(
            (
                float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
                for v in values
            ),
            dtype=np.float64,
            count=len(values),
        )


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Exact µs -> ns (metrics.md §1): integer part times 1000 plus the rounded fraction.

    Splitting keeps large absolute integer µs (old traces, ~1.7e15) exact, where multiplying
    the float by 1000 first would round to 256 ns.
    """
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


_DUPLICATE = object()


class SymbolTable:
    """Strings to dense int32 ids; `symbols[id]` gives the string back."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self.symbols: list[str] = []

    def ids(self, names: list) -> np.ndarray:
        table = self._ids
        before = len(table)
        try:
            # the distinct names in first-seen order (in C); only new ones are looped over, so a
            # new name's id is the table's size when it is first seen
            distinct = dict.fromkeys(names)
        except TypeError:  # unhashable names: fall back to strings
            names = [n if isinstance(n, str) else ("" if n is None else str(n)) for n in names]
            distinct = dict.fromkeys(names)
        for n in distinct:
            if n not in table:
                table[n] = len(table)
        out = np.fromiter(map(table.__getitem__, names), dtype=np.int32, count=len(names))
        if len(table) != before:
            self.symbols.extend(list(table)[before:])
        if None in table:  # keep ids of missing names pointing at ""
            self.symbols[table[None]] = ""
        return out

    @classmethod
    def from_symbols(cls, symbols: list[str]) -> SymbolTable:
        """A table whose ids are the positions in `symbols` (a string seen twice keeps its first id)."""
        table = cls()
        table.symbols = list(symbols)
        for i, name in enumerate(symbols):
            if name in table._ids:
                name = (_DUPLICATE, i)  # keeps len(_ids) == len(symbols), which `ids` relies on
            table._ids[name] = i
        return table

    def id(self, name: str) -> int:
        return int(self.ids([name])[0])


def lookup(
    keys: np.ndarray, values: np.ndarray, queries: np.ndarray, missing=MISSING
) -> np.ndarray:
    """values[k] for each query equal to keys[k] (keys need not be sorted), else `missing`.

    With duplicate keys, the last one in `keys` order wins.
    """
    if len(keys) == 0 or len(queries) == 0:
        return np.full(len(queries), missing, dtype=values.dtype if len(values) else np.int64)
    return values_at(values, matching_rows(keys, queries), missing)


def matching_rows(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per query: the index of the key equal to it (keys need not be sorted; with duplicates the
    last in `keys` order), -1 where none is or the query is `MISSING`. `lookup` without the
    values: one search serves every column of the same keys (`values_at`)."""
    if len(keys) == 0 or len(queries) == 0:
        return np.full(len(queries), -1, np.int64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    pos = np.searchsorted(sk, queries, side="right") - 1
    pos_clipped = np.clip(pos, 0, len(sk) - 1)
    found = (pos >= 0) & (sk[pos_clipped] == queries) & (queries != MISSING)
    return np.where(found, order[pos_clipped], -1)


def values_at(values: np.ndarray, rows: np.ndarray, missing=MISSING) -> np.ndarray:
    """values[rows], `missing` where a row is -1 (`matching_rows`'s rows)."""
    out = np.full(len(rows), missing, dtype=values.dtype)
    found = rows >= 0
    out[found] = values[rows[found]]
    return out


def containing(
    lo: np.ndarray, hi: np.ndarray, t: np.ndarray, *, closed: bool = False
) -> np.ndarray:
    """Per time in `t`: the index of the interval [lo[i], hi[i]) that holds it (with `closed`,
    [lo[i], hi[i]]), -1 when none.

    Meant for disjoint intervals such as step windows (they need not be sorted). Only the interval
    that starts last at or before each time is looked at, so with overlapping intervals a time
    held only by an earlier-starting one gets -1.
    """
    t = np.asarray(t)
    if len(lo) == 0 or len(t) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    order = np.argsort(lo, kind="stable")
    pos = np.searchsorted(lo[order], t, side="right") - 1
    safe = np.clip(pos, 0, len(lo) - 1)
    end = hi[order][safe]
    inside = (pos >= 0) & ((t <= end) if closed else (t < end))
    return np.where(inside, order[safe], -1).astype(np.int64)


def unique_rows(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows of the integer columns in lexicographic order as an (m, k) array, the row of
    each input): `np.unique(axis=0)` by one lexsort, many times faster on millions of rows."""
    n = len(cols[0])
    if n == 0:
        return np.zeros((0, len(cols)), np.int64), np.zeros(0, np.int64)
    lo = [int(np.min(c)) for c in cols]
    spans = [int(np.max(c)) - m + 1 for c, m in zip(cols, lo)]
    if float(np.prod([float(x) for x in spans])) < 2.0**62:  # one packed int64 key: a 1-D sort
        key = np.zeros(n, np.int64)
        for c, m, span in zip(cols, lo, spans):
            key = key * span + (np.asarray(c, np.int64) - m)
        packed, inverse = np.unique(key, return_inverse=True)
        out = np.empty((len(packed), len(cols)), np.int64)
        for j in range(len(cols) - 1, -1, -1):
            out[:, j] = packed % spans[j] + lo[j]
            packed = packed // spans[j]
        return out, inverse.reshape(-1)
    order = np.lexsort(cols[::-1])
    srt = [np.asarray(c)[order] for c in cols]
    new = np.zeros(n, bool)
    new[0] = True
    for c in srt:
        new[1:] |= c[1:] != c[:-1]
    inverse = np.empty(n, np.int64)
    inverse[order] = np.cumsum(new) - 1
    return np.stack([c[new] for c in srt], axis=1), inverse
