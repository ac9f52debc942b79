"""Bench helpers: the variants timed, the printed table."""

from __future__ import annotations

import torch

from tpscope.fusion.bench import BenchConfig, format_table, variants


def test_variants_drop_illegal_chunks_and_symm_mem_on_cpu():
    cfg = BenchConfig(modes=("chunked", "ring", "symm_mem"), chunks=(2, 3, 4))
    assert variants(cfg, 8, torch.device("cpu")) == [("chunked", 2), ("chunked", 4), ("ring", 1)]
    assert ("symm_mem", 1) in variants(cfg, 8, torch.device("cuda"))


def test_table_marks_a_wrong_output():
    t = {"median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1}
    result = {"S": 8, "H": 4, "F": 8, "side": "ag", "gemm": t, "comm": t, "unfused": t, "variants": [
        {"mode": "ring", "chunks": 1, "timing": t, "E": 0.5, "attained_saving": None, "ok": False},
        {"mode": "symm_mem", "chunks": 1, "error": "SymmMemUnavailable: no"}]}
    text = format_table([result], "nvlink")
    assert "WRONG" in text and "error: SymmMemUnavailable" in text and "0.50" in text
