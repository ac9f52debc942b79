"""Which contended signatures the tables show (tpscope/metrics/contention_rank.py): the floor of
significance and the order by tax, on hand-made rows whose answer is worked out here."""

from __future__ import annotations

from tpscope.metrics.contention import KernelContention
from tpscope.metrics.contention_rank import (
    MIN_DELTA_US,
    MIN_SAMPLES,
    distinct_labels,
    ranked_kernels,
)


def _k(sig, n_iso, n_ovl, iso, ovl):
    return KernelContention(sig, n_iso, n_ovl, iso, ovl, ovl / iso - 1, "own")


def test_noise_is_left_out_and_the_rest_ranked_by_tax():
    rows = [
        _k("radix_sort", 6, 6, 5.0, 115.0),  # +2200%, but 6 samples
        _k("aten::empty_strided", 40, 40, 1.7, 10.8),  # +536% ... of 1.7 µs: kept (9.1 µs apart)
        _k("rounded", 50, 50, 2.0, 3.0),  # +50% from whole-µs rounding: 1 µs apart
        _k("gemm_a", 100, 30, 300.0, 400.0),  # 30 × 100 / 6 rank-steps = 500 µs per step
        _k("gemm_b", 100, 300, 100.0, 120.0),  # 300 × 20 / 6 = 1,000 µs per step
        KernelContention("no_median", 0, 10, None, 5.0, None, None),
    ]
    kept, under = ranked_kernels(rows, 6)
    assert [k.signature for k in kept] == ["gemm_b", "gemm_a", "aten::empty_strided"]
    assert [round(k.tax_us_per_step, 6) for k in kept] == [1000.0, 500.0, round(40 * 9.1 / 6, 6)]
    assert under == 2  # radix_sort (samples) and rounded (µs); no_median has no median to judge
    assert MIN_SAMPLES > 6 and 1.0 < MIN_DELTA_US <= 9.1


def test_labels_long_enough_to_tell_rows_apart():
    common = "void cutlass::Kernel<cutlass::gemm::GemmUniversal<" + "x" * 40
    names = [common + "_128x128", common + "_256x128", "short"]
    labels = distinct_labels(names, 40)
    assert len(set(labels)) == 3 and labels[2] == "short"
    assert all(len(lab) <= len(n) for lab, n in zip(labels, names))
    assert labels[0].endswith("_128x128") or labels[0][:-1] != labels[1][:-1]
