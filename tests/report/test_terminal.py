"""The terminal tables' labels."""

from __future__ import annotations

from tpscope.report.terminal import _signature_label


def test_a_kernel_label_keeps_name_grid_and_dims_short():
    # a multi-tensor kernel: every tensor's shape
    dims = "[" + ", ".join(["[8192, 12288]"] * 40) + "]"
    label = _signature_label(
        f"void multi_tensor_apply_kernel_{'x' * 40}|grid=[320, 1, 1]|block=[512, 1, 1]|dims={dims}"
    )
    name, grid, dims_part = (
        label.split(" ", 2)[0],
        label.split(" grid=")[1].split(" dims=")[0],
        label.split(" dims=")[1],
    )
    assert name == "multi_tensor_apply_kernel_xxxxx…" and len(name) == 32
    assert grid == "[320, 1, 1]" and "block" not in label
    assert (
        len("dims=" + dims_part) == 48
        and dims_part.endswith("…")
        and dims_part.startswith("[[8192, 12288]")
    )
    short = _signature_label("gemm|grid=[4, 1, 1]|block=[128, 1, 1]|dims=[[64, 64], [64, 64]]")
    assert short == "gemm grid=[4, 1, 1] dims=[[64, 64], [64, 64]]"  # short parts stay whole


def test_one_number_formatter_for_every_report():
    """Terminal, Markdown, JUnit and the comparison lines format numbers through tpscope.numbers.number."""
    from tpscope.numbers import number
    from tpscope.report.metric_defs import format_delta, format_value
    from tpscope.report.terminal import fmt

    assert number(None) == "-" and fmt(None) == "-"
    assert number(1234.56) == "1,234.6 µs" and fmt(1234.56) == "1,234.6"
    assert number(0.4567, "ratio") == "45.7%" == fmt(0.4567, "pct")
    assert number(-0.012, "ratio", signed=True) == "-1.2 pp" == format_delta(-0.012, "ratio")
    assert number(0.1, "relative") == "+10.0%"
    assert (
        format_value(3 * 2**30, "bytes") == "3.00 GiB"
        and format_delta(2**29, "bytes") == "+0.50 GiB"
    )
    assert format_value(88499.4, "tokens/s") == "88,499" and fmt(1.23456, "x") == "1.235"
