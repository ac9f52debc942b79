"""Column helpers: exact µs -> ns, symbol tables, lookups."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpscope.trace.columns import (
    SymbolTable,
    containing,
    int_column,
    lookup,
    matching_rows,
    sorted_unique,
    unique_ids,
    unique_rows,
    us_to_ns,
    values_at,
)


def test_us_to_ns_is_exact_for_large_integers_and_fractions():
    us = np.array([1_700_000_000_000_123.0, 5169710458066.339, 0.001])
    assert us_to_ns(us).tolist() == [1_700_000_000_000_123_000, 5169710458066339, 1]


def test_symbol_ids_are_stable_and_missing_names_are_empty():
    t = SymbolTable()
    assert t.ids(["a", "b", "a", None]).tolist() == [0, 1, 0, 2]
    assert t.symbols == ["a", "b", ""]
    assert t.ids(["c", "a"]).tolist() == [3, 0]
    assert t.symbols == ["a", "b", "", "c"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.sampled_from("abcdefg"), st.text(max_size=3)))))
def test_symbol_ids_match_a_first_seen_numbering_across_calls(batches):
    t, seen = SymbolTable(), {}
    for names in batches:
        expected = [seen.setdefault(n, len(seen)) for n in names]  # first seen, first numbered
        assert t.ids(names).tolist() == expected
    assert t.symbols == ["" if n is None else n for n in seen]


def test_unhashable_names_are_numbered_as_their_text():
    t = SymbolTable()
    assert t.ids(["[1]", [1], None, ""]).tolist() == [0, 0, 1, 1]
    assert t.symbols == ["[1]", ""]


def test_table_from_symbols_with_duplicates_keeps_positions():
    t = SymbolTable.from_symbols(["x", "", "y", ""])
    assert t.ids(["y", "z", "x", "w"]).tolist() == [2, 4, 0, 5]
    assert t.symbols == ["x", "", "y", "", "z", "w"]


def test_int_column_turns_bad_values_into_missing():
    assert int_column([1, None, 2**80, "12", "x", 3.0]).tolist() == [1, -1, -1, 12, -1, 3]


def test_lookup_joins_on_unsorted_keys():
    keys = np.array([30, 10, 20])
    values = np.array([3, 1, 2])
    assert lookup(keys, values, np.array([10, 20, 99, -1, 30])).tolist() == [1, 2, -1, -1, 3]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-1, 6), max_size=10), st.lists(st.integers(-2, 8), max_size=10))
def test_matching_rows_is_the_last_equal_key_and_serves_every_column(keys, queries):
    """Against a dict built key by key (a later duplicate replaces an earlier one)."""
    last = {}
    for row, key in enumerate(keys):
        last[key] = row
    want = [last.get(q, -1) if q != -1 else -1 for q in queries]
    k, q = np.array(keys, np.int64), np.array(queries, np.int64)
    rows = matching_rows(k, q)
    assert rows.tolist() == want
    values = np.arange(100, 100 + len(keys), dtype=np.int32)
    assert values_at(values, rows).tolist() == [100 + r if r >= 0 else -1 for r in want]
    assert values_at(values, rows).dtype == np.int32
    assert lookup(k, values, q).tolist() == values_at(values, rows).tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(1, 6)), max_size=8),
    st.lists(st.integers(-3, 80), max_size=12),
    st.booleans(),
    st.randoms(),
)
def test_containing_matches_brute_force_half_open_and_closed(gaps_and_lengths, times, closed, rnd):
    """Disjoint intervals laid end to end with gaps (a gap of 0 makes two touch), given unsorted."""
    lo, hi, t0 = [], [], 0
    for gap, length in gaps_and_lengths:
        t0 += gap + (1 if closed else 0)  # closed intervals must not share an end point
        lo.append(t0)
        hi.append(t0 + length)
        t0 += length
    order = list(range(len(lo)))
    rnd.shuffle(order)
    lo_a, hi_a = (
        np.array([lo[i] for i in order], np.int64),
        np.array([hi[i] for i in order], np.int64),
    )
    got = containing(lo_a, hi_a, np.array(times, np.int64), closed=closed).tolist()
    for t, i in zip(times, got, strict=True):
        holders = [
            k
            for k in range(len(lo_a))
            if lo_a[k] <= t and (t <= hi_a[k] if closed else t < hi_a[k])
        ]
        assert i == (holders[0] if holders else -1)


def test_unique_rows_is_numpys_unique_by_rows():
    rng = np.random.default_rng(1)
    a, b = rng.integers(-1, 4, 500), rng.integers(0, 3, 500)
    uniq, inverse = unique_rows(a, b)
    want, want_inverse = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    assert np.array_equal(uniq, want) and np.array_equal(inverse, want_inverse.reshape(-1))
    assert unique_rows(np.zeros(0, np.int64))[0].shape == (0, 1)
    big = np.array([2**40, -(2**40), 5, 2**40])  # spans too wide to pack: the lexsort path
    uniq, inverse = unique_rows(big, big, big)
    assert uniq[:, 0].tolist() == [-(2**40), 5, 2**40] and inverse.tolist() == [2, 0, 1, 2]


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 4),
    st.lists(st.integers(-3, 3), min_size=1, max_size=60),
    st.sampled_from([np.int32, np.int64]),
)
def test_unique_rows_matches_numpy_on_any_columns(k, values, dtype):
    cols = [np.roll(np.array(values, dtype), j) for j in range(k)]
    uniq, inverse = unique_rows(*cols)
    want, want_inverse = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    assert uniq.tolist() == want.tolist() and inverse.tolist() == want_inverse.reshape(-1).tolist()


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.uint32])
def test_unique_ids_and_sorted_unique_are_numpys_unique(dtype):
    rng = np.random.default_rng(5)
    cases = [
        rng.integers(0, 300, 20_000),  # symbol ids: a small range, a table
        rng.integers(0, 10**4, 50),  # a sparse range: numpy's unique
        np.array([7]),
        np.array([], np.int64),
        np.array([3, 3, 0, 3]),
    ]
    if np.dtype(dtype).kind == "i":
        cases += [np.append(rng.integers(-1, 40, 1000), -1)]  # -1: no name
    for values in cases:
        v = values.astype(dtype)
        uniq, inverse = unique_ids(v)
        want, want_inverse = np.unique(v, return_inverse=True)
        assert uniq.dtype == want.dtype and uniq.tolist() == want.tolist()
        assert inverse.tolist() == want_inverse.ravel().tolist()
        assert (uniq[inverse] == v).all()
        assert sorted_unique(v).tolist() == sorted(set(v.tolist()))
    times = rng.integers(0, 2**62, 10_000)  # wide-ranging times, with repeats
    times = np.concatenate([times, times[:100]])
    assert sorted_unique(times).tolist() == sorted(set(times.tolist()))
