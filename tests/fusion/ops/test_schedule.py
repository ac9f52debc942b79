"""chunk_bounds against its contract, checked by brute force over every small case."""

from __future__ import annotations

import pytest

from tpscope.fusion.ops.schedule import GRANULE, chunk_bounds


@pytest.mark.parametrize("taper", ["", "first", "last"])
def test_pieces_cover_the_rows_in_order(taper):
    for rows in range(1, 300):
        for chunks in range(1, min(rows, 9) + 1):
            bounds = chunk_bounds(rows, chunks, taper)
            sizes = [b - a for a, b in bounds]
            assert len(bounds) == chunks
            assert bounds[0][0] == 0 and bounds[-1][1] == rows
            assert all(bounds[i][1] == bounds[i + 1][0] for i in range(chunks - 1))
            assert min(sizes) >= 1
            if not taper or chunks == 1:
                assert max(sizes) - min(sizes) <= rows % chunks  # even, remainder on one piece
                continue
            tapered = sizes[0] if taper == "first" else sizes[-1]
            others = sizes[1:] if taper == "first" else sizes[:-1]
            assert tapered == max(1, rows // chunks // 2), (rows, chunks, taper, sizes)
            assert tapered <= min(others), (rows, chunks, taper, sizes)


def test_untapered_pieces_are_whole_tiles_when_the_rows_allow():
    for chunks in (2, 4, 8):
        for rows in (4096, 8192, 2 * GRANULE * chunks, 3000 * chunks):
            for taper in ("first", "last"):
                sizes = [b - a for a, b in chunk_bounds(rows, chunks, taper)]
                others = sizes[1:] if taper == "first" else sizes[:-1]
                # all but the one farthest from the tapered piece, which takes the remainder
                near = others[:-1] if taper == "first" else others[1:]
                assert all(s % GRANULE == 0 for s in near), (rows, chunks, taper, sizes)


def test_the_reference_shape_at_four_chunks():
    # worked by hand: 4096 rows, even piece 1024, tapered 512, the others 3584 = 1152 + 1152 + 1280
    assert chunk_bounds(4096, 4, "last") == ((0, 1280), (1280, 2432), (2432, 3584), (3584, 4096))
    assert chunk_bounds(4096, 4, "first") == ((0, 512), (512, 1664), (1664, 2816), (2816, 4096))
    assert chunk_bounds(4096, 4) == ((0, 1024), (1024, 2048), (2048, 3072), (3072, 4096))


def test_refusals():
    with pytest.raises(ValueError, match="taper"):
        chunk_bounds(8, 2, "middle")
    with pytest.raises(ValueError, match="non-empty"):
        chunk_bounds(3, 4)
