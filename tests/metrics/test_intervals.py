"""Interval algebra against a brute-force reference on a unit grid (hypothesis)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tpscope.metrics import intervals as iv

HORIZON = 60

interval_lists = st.lists(
    st.tuples(st.integers(0, HORIZON), st.integers(0, 15)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=12,
)


def cover(pairs) -> np.ndarray:
    """Brute force: which unit cells [t, t+1) the intervals cover."""
    grid = np.zeros(HORIZON + 20, dtype=bool)
    for s, e in pairs:
        grid[s:e] = True
    return grid


def as_set(pairs) -> iv.IntervalSet:
    if not pairs:
        return iv.empty()
    s, e = zip(*pairs)
    return iv.union(np.array(s), np.array(e))


def cells(a: iv.IntervalSet) -> np.ndarray:
    return cover(list(zip(a[0].tolist(), a[1].tolist())))


def assert_disjoint_sorted(a: iv.IntervalSet) -> None:
    s, e = a
    assert np.all(e > s)
    assert np.all(s[1:] > e[:-1])  # disjoint and not touching (touching pieces are joined)


@settings(max_examples=300, deadline=None)
@given(interval_lists)
def test_union_matches_brute_force(pairs):
    u = as_set(pairs)
    assert_disjoint_sorted(u)
    assert np.array_equal(cells(u), cover(pairs))
    assert iv.total(u) == cover(pairs).sum()


@settings(max_examples=300, deadline=None)
@given(interval_lists, interval_lists)
def test_intersection_and_difference(a_pairs, b_pairs):
    a, b = as_set(a_pairs), as_set(b_pairs)
    inter, diff = iv.intersection(a, b), iv.difference(a, b)
    assert_disjoint_sorted(inter)
    assert_disjoint_sorted(diff)
    assert np.array_equal(cells(inter), cover(a_pairs) & cover(b_pairs))
    assert np.array_equal(cells(diff), cover(a_pairs) & ~cover(b_pairs))
    both = iv.union_sets(a, b)
    assert np.array_equal(cells(both), cover(a_pairs) | cover(b_pairs))


@settings(max_examples=300, deadline=None)
@given(interval_lists, st.integers(0, HORIZON), st.integers(0, 30))
def test_clip(pairs, lo, width):
    hi = lo + width
    clipped = iv.clip(as_set(pairs), lo, hi)
    expected = cover(pairs)
    expected[:lo] = False
    expected[hi:] = False
    assert np.array_equal(cells(clipped), expected)


@settings(max_examples=300, deadline=None)
@given(interval_lists, interval_lists)
def test_overlap_with_set(query_pairs, cover_pairs):
    c = as_set(cover_pairs)
    grid = cover(cover_pairs)
    starts = np.array([s for s, _ in query_pairs], dtype=np.int64)
    ends = np.array([e for _, e in query_pairs], dtype=np.int64)
    got = iv.overlap_with_set(starts, ends, c)
    expected = [int(grid[s:e].sum()) for s, e in query_pairs]
    assert got.tolist() == expected


def test_nested_and_unsorted_input():
    s, e = iv.union(np.array([10, 0, 2, 3]), np.array([12, 9, 4, 5]))
    assert s.tolist() == [0, 10] and e.tolist() == [9, 12]


def test_empty_inputs():
    empty = iv.empty()
    one = iv.union(np.array([0]), np.array([5]))
    assert iv.total(iv.intersection(empty, one)) == 0
    assert iv.total(iv.difference(one, empty)) == 5
    assert iv.total(iv.difference(empty, one)) == 0
    assert iv.total(iv.clip(empty, 0, 10)) == 0


@settings(max_examples=200, deadline=None)
@given(interval_lists, st.lists(st.integers(-5, HORIZON + 20), max_size=10), st.randoms())
def test_containing_matches_brute_force_on_disjoint_intervals(pairs, times, rnd):
    lo, hi = as_set(pairs)
    order = list(range(len(lo)))
    rnd.shuffle(order)  # unsorted input
    lo, hi = lo[order], hi[order]
    got = iv.containing(lo, hi, np.array(times, dtype=np.int64)).tolist()
    for t, i in zip(times, got, strict=True):
        holders = [k for k in range(len(lo)) if lo[k] <= t < hi[k]]
        assert i == (holders[0] if holders else -1)
