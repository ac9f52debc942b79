"""The terminal tables' labels."""

from __future__ import annotations

from tpscope.report.terminal import _signature_label


def test_a_kernel_label_keeps_name_grid_and_dims_short():
    dims = "[" + ", ".join(["[8192, 12288]"] * 40) + "]"  # a multi-tensor kernel: every tensor's shape
    label = _signature_label(f"void multi_tensor_apply_kernel_{'x' * 40}|grid=[320, 1, 1]|block=[512, 1, 1]|dims={dims}")
    name, grid, dims_part = label.split(" ", 2)[0], label.split(" grid=")[1].split(" dims=")[0], label.split(" dims=")[1]
    assert name == "multi_tensor_apply_kernel_xxxxx…" and len(name) == 32
    assert grid == "[320, 1, 1]" and "block" not in label
    assert len("dims=" + dims_part) == 48 and dims_part.endswith("…") and dims_part.startswith("[[8192, 12288]")
    short = _signature_label("gemm|grid=[4, 1, 1]|block=[128, 1, 1]|dims=[[64, 64], [64, 64]]")
    assert short == "gemm grid=[4, 1, 1] dims=[[64, 64], [64, 64]]"  # short parts stay whole
