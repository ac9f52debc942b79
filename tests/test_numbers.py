"""How numbers print: one rule per kind of number, for every place a person reads them."""

from __future__ import annotations

import numpy as np

from tpscope.numbers import number, size_text


def test_each_unit_prints_by_its_rule():
    assert number(1234.56) == "1,234.6 µs" and number(1234.56, with_unit=False) == "1,234.6"
    assert number(-3.25, "us", signed=False) == "-3.2 µs" and number(3.25, signed=True) == "+3.2 µs"
    assert (
        number(0.4567, "ratio") == "45.7%" and number(0.4567, "ratio", with_unit=False) == "45.7%"
    )
    assert (
        number(-0.012, "ratio", signed=True) == "-1.2 pp"
        and number(0.3, "ratio", signed=True) == "+30.0 pp"
    )
    assert number(0.1, "relative") == "+10.0%" and number(-0.05, "relative") == "-5.0%"
    assert (
        number(3 * 2**30, "bytes") == "3.00 GiB"
        and number(2**29, "bytes", signed=True) == "+0.50 GiB"
    )
    assert number(2**29, "bytes", with_unit=False) == "0.50"
    assert number(88499.4, "tokens/s") == "88,499" and number(1234567.5, "count") == "1,234,568"
    assert number(1.23456, "x") == "1.235" and number(412.345, "gbps") == "412.3"
    assert number(0.4251, "fraction") == "0.43" and number(-0.5, "fraction") == "-0.50"


def test_unknown_is_a_dash_or_what_the_caller_says():
    assert number(None) == "-" and number(None, "ratio") == "-"
    assert number(None, "ratio", missing="not available") == "not available"


def test_numpy_numbers_print_as_python_numbers():
    assert (
        number(np.float64(2500.0), "count") == "2,500"
        and number(np.float32(0.25), "ratio") == "25.0%"
    )


def test_byte_counts_in_binary_units_as_short_as_exact():
    assert size_text(0) == "0 B" and size_text(1023) == "1023 B"
    assert size_text(1024) == "1 KiB" and size_text(1536) == "1.5 KiB"
    assert (
        size_text(8 * 2**20) == "8 MiB"
        and size_text(3 * 2**30) == "3 GiB"
        and size_text(2**41) == "2 TiB"
    )
    assert size_text(4 * 2**20 // 3) == "1.33333 MiB"  # six significant digits at most


def test_a_slow_bandwidth_keeps_three_significant_digits():
    """A gloo link's 0.0023 GB/s never prints as a false 0.0; 1 GB/s and above keep one decimal."""
    assert number(0.002328066, "gbps") == "0.00233" and number(0.14050847, "gbps") == "0.141"
    assert number(0.999, "gbps") == "0.999" and number(1.04, "gbps") == "1.0"
    assert number(0.0, "gbps") == "0.0" and number(None, "gbps") == "-"
