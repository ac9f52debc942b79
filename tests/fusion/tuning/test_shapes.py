"""Shape presets and `S,H,F` parsing (no torch needed)."""

from __future__ import annotations

import pytest

from tpscope.fusion.tuning.shapes import SHAPES, parse_shape


def test_reference_shapes_are_those_of_benchmarks_md():
    assert SHAPES["ref"] == (8192, 8192, 28672)
    assert SHAPES["s4096"][0] == 4096 and SHAPES["s16384"][0] == 16384
    assert SHAPES["8b"] == (8192, 4096, 14336)
    assert parse_shape("64,32,128") == (64, 32, 128)
    for bad in ("big", "1,2", "0,4,4"):
        with pytest.raises(ValueError, match="shape"):
            parse_shape(bad)
