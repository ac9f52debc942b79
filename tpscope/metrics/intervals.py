"""Interval algebra over numpy arrays of half-open [start, end) int64 intervals.

A *set* is a pair `(starts, ends)` of sorted, disjoint, non-empty intervals, as `union` returns.
Every function is vectorized: sorting plus cumulative sums, no Python loop over intervals.
"""

from __future__ import annotations

import numpy as np

from tpscope.trace.columns import containing  # noqa: F401 - the step lookup metrics use

IntervalSet = tuple[np.ndarray, np.ndarray]
_EMPTY = np.zeros(0, dtype=np.int64)


def empty() -> IntervalSet:
    return _EMPTY, _EMPTY


def union(starts: np.ndarray, ends: np.ndarray) -> IntervalSet:
    """Merge any intervals (overlapping, nested, unsorted) into a disjoint sorted set."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return empty()
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # a new block begins where the start lies past everything reached before it
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    # each block ends with what was reached at its last member
    last = np.flatnonzero(np.append(new[1:], True))
    return s[new], reach[last]


def total(a: IntervalSet) -> int:
    """Total length of a disjoint set."""
    return int((a[1] - a[0]).sum())


def clip(a: IntervalSet, lo: int, hi: int) -> IntervalSet:
    """The part of a disjoint set inside [lo, hi)."""
    s, e = a
    i = np.searchsorted(e, lo, side="right")
    j = np.searchsorted(s, hi, side="left")
    s, e = s[i:j], e[i:j]
    s = np.maximum(s, lo)
    e = np.minimum(e, hi)
    keep = e > s
    return s[keep], e[keep]


def intersection(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """a ∩ b for two disjoint sets: where the coverage count of both reaches 2."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return empty()
    return _combine(a, b, lambda ca, cb: (ca > 0) & (cb > 0))


def difference(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """a minus b for two disjoint sets."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    return _combine(a, b, lambda ca, cb: (ca > 0) & (cb == 0))


def union_sets(*sets: IntervalSet) -> IntervalSet:
    """The union of several disjoint sets."""
    if not sets:
        return empty()
    return union(np.concatenate([s[0] for s in sets]), np.concatenate([s[1] for s in sets]))


def _combine(a: IntervalSet, b: IntervalSet, keep) -> IntervalSet:
    # Edge sweep: +1/-1 per set, counted separately (the HTA-style cumulative-sum trick).
    points = np.concatenate([a[0], a[1], b[0], b[1]])
    da = np.concatenate([np.ones(len(a[0])), -np.ones(len(a[1])), np.zeros(2 * len(b[0]))]).astype(
        np.int64
    )
    db = np.concatenate([np.zeros(2 * len(a[0])), np.ones(len(b[0])), -np.ones(len(b[1]))]).astype(
        np.int64
    )
    order = np.argsort(points, kind="stable")
    points, da, db = points[order], da[order], db[order]
    # collapse equal points so a coverage value holds over [points[k], points[k+1])
    uniq, first = np.unique(points, return_index=True)
    ca = np.add.reduceat(da, first).cumsum()
    cb = np.add.reduceat(db, first).cumsum()
    inside = keep(ca, cb)[:-1]
    s, e = uniq[:-1][inside], uniq[1:][inside]
    return union(s, e)  # join touching pieces


def overlap_with_set(starts: np.ndarray, ends: np.ndarray, cover: IntervalSet) -> np.ndarray:
    """Per interval i: |[starts[i], ends[i]) ∩ cover|, for a disjoint sorted `cover`.

    Uses the prefix sum of the cover's lengths: O((n + m) log m), no loop.
    """
    cs, ce = cover
    if len(cs) == 0 or len(starts) == 0:
        return np.zeros(len(starts), dtype=np.int64)
    prefix = np.concatenate([[0], np.cumsum(ce - cs)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # total cover length in (-inf, t)
        k = np.searchsorted(cs, t, side="right")  # intervals starting at or before t
        full = prefix[np.maximum(k - 1, 0)] * (k > 0)
        last = np.clip(k - 1, 0, len(cs) - 1)
        part = np.where(k > 0, np.clip(np.minimum(t, ce[last]) - cs[last], 0, None), 0)
        return full + part

    return covered_before(np.asarray(ends)) - covered_before(np.asarray(starts))
