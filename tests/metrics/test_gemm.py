"""metrics.md §8: GEMM shapes from the launching op's Input Dims, and baselines by shape."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpscope.metrics.gemm import (
    GemmShape,
    baselines,
    exact_baseline,
    interpolated_baseline,
    parse_shape,
)

BF = json.dumps(["c10::BFloat16"] * 3)


@pytest.mark.parametrize(
    "op, dims, expected",
    [
        ("aten::mm", [[1024, 4096], [4096, 8192]], (1, 1024, 4096, 8192)),
        ("aten::mm", [[1024, 4096], [4096, 8192], [1024, 8192]], (1, 1024, 4096, 8192)),  # mm.out
        ("aten::addmm", [[8192], [1024, 4096], [4096, 8192]], (1, 1024, 4096, 8192)),
        ("aten::addmm_", [[4096, 8192], [4096, 1024], [1024, 8192]], (1, 4096, 1024, 8192)),
        ("aten::bmm", [[8, 128, 64], [8, 64, 256]], (8, 128, 64, 256)),
        ("aten::addbmm", [[128, 256], [8, 128, 64], [8, 64, 256]], (8, 128, 64, 256)),
        ("aten::baddbmm", [[8, 128, 256], [8, 128, 64], [8, 64, 256]], (8, 128, 64, 256)),
        ("aten::linear", [[2, 512, 4096], [8192, 4096], [8192]], (1, 1024, 4096, 8192)),
        ("aten::matmul", [[2, 512, 4096], [4096, 8192]], (1, 1024, 4096, 8192)),
        ("aten::matmul", [[4, 2, 16, 32], [4, 2, 32, 8]], (8, 16, 32, 8)),
        ("aten::_scaled_mm", [[64, 128], [128, 32], [], []], (1, 64, 128, 32)),
    ],
)
def test_shapes_of_the_gemm_ops(op, dims, expected):
    s = parse_shape(op, json.dumps(dims), BF)
    assert (s.batch, s.m, s.k, s.n, s.dtype) == (*expected, "BFloat16")
    b, m, k, n = expected
    assert s.flops == 2 * b * m * k * n


@pytest.mark.parametrize(
    "op, dims",
    [
        ("aten::add", [[1024, 4096], [1024, 4096]]),  # no GEMM op
        ("aten::mm", [[1024, 4096], [2048, 8192]]),  # inner dims disagree
        ("aten::mm", [[1024, 4096]]),  # one operand
        ("aten::linear", [[1024, 4096], [8192, 2048]]),
    ],
)
def test_what_is_no_gemm(op, dims):
    assert parse_shape(op, json.dumps(dims), BF) is None


def test_malformed_dims_are_no_gemm():
    assert parse_shape("aten::mm", "[[1024, 4096], [4096", BF) is None
    assert parse_shape("aten::mm", "", BF) is None


def _shape(m, k=4096, n=4096):
    return GemmShape(1, m, k, n, "BFloat16")


def test_exact_baseline_prefers_the_grid_with_the_most_ctas_and_the_run_over_the_reference():
    run = {
        (_shape(1024), (116, 1, 1)): np.array([110.0, 112, 114]),
        (_shape(1024), (2, 66, 1)): np.array([100.0, 101, 99]),
    }
    ref = {(_shape(1024), (132, 1, 1)): np.array([90.0, 90, 90])}
    b = exact_baseline(_shape(1024), [run, ref, {}])
    assert (b.full_ns, b.grid, b.source, b.rule) == (100.0, (2, 66, 1), "run", 1)
    b = exact_baseline(_shape(1024), [{}, ref, {}])
    assert (b.full_ns, b.source) == (90.0, "reference")
    short = {(_shape(1024), (132, 1, 1)): np.array([90.0, 90])}  # fewer than 3 samples: none
    assert exact_baseline(_shape(1024), [short, {}, {}]) is None


def test_interpolation_between_brackets_only_along_one_dim():
    pool = {
        (_shape(1000), (132, 1, 1)): np.array([100.0] * 3),
        (_shape(3000), (132, 1, 1)): np.array([300.0] * 3),
        (_shape(2000, k=8192), (132, 1, 1)): np.array([999.0] * 3),
    }
    known = {s: exact_baseline(s, [pool]) for s, _ in pool}
    mid = interpolated_baseline(_shape(2000), known)
    assert mid.full_ns == pytest.approx(200.0) and mid.rule == 2  # along M
    assert interpolated_baseline(_shape(4000), known) is None  # beyond the Ms: no extrapolation
    assert interpolated_baseline(_shape(2000, k=2048, n=2048), known) is None  # shares one dim only
    # M=2000 K=4096 is unknown: nothing on K
    k_mid = interpolated_baseline(_shape(2000, k=6144), known)
    assert k_mid is None
    got = baselines((_shape(2000), _shape(4000)), [pool, {}, {}])
    assert got[0].full_ns == pytest.approx(200.0) and got[1] is None
    # the upper bracket only in the reference
    ref = {(_shape(3000), (132, 1, 1)): np.array([300.0] * 3)}
    low = {(_shape(1000), (132, 1, 1)): np.array([100.0] * 3)}
    (mixed,) = baselines((_shape(2000),), [low, ref, {}])
    assert mixed.full_ns == pytest.approx(200.0) and mixed.source == "run+reference"
