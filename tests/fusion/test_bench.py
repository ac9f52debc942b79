"""Bench helpers: the variants timed, the printed table."""

from __future__ import annotations

import torch

from tpscope.fusion.bench import BenchConfig, format_table, variant_label, variants


def test_variants_drop_illegal_chunks_and_symm_mem_on_cpu():
    cfg = BenchConfig(modes=("chunked", "ring", "symm_mem"), chunks=(2, 3, 4), ring_chunks=(1, 3, 8))
    assert variants(cfg, 8, torch.device("cpu")) == [
        ("chunked", 2, True), ("chunked", 4, True), ("ring", 1, True), ("ring", 8, True)]
    assert ("symm_mem", 1, True) in variants(cfg, 8, torch.device("cuda"))
    both = BenchConfig(modes=("chunked",), chunks=(2,), rank_order=True)
    assert variants(both, 8, torch.device("cpu"), "ag") == [("chunked", 2, True), ("chunked", 2, False)]
    assert variants(both, 8, torch.device("cpu"), "rs") == [("chunked", 2, True)]


def test_variant_labels():
    assert variant_label({"mode": "chunked", "chunks": 4, "own_first": True}, "ag") == "chunked/k4"
    assert variant_label({"mode": "chunked", "chunks": 4}, "ag") == "chunked/k4/rank-order"
    assert variant_label({"mode": "chunked", "chunks": 4}, "rs") == "chunked/k4"
    assert variant_label({"mode": "ring", "chunks": 1}, "rs") == "ring"
    assert variant_label({"mode": "ring", "chunks": 2}, "rs") == "ring/k2"


def test_table_marks_a_wrong_output():
    t = {"median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1}
    result = {"S": 8, "H": 4, "F": 8, "side": "ag", "gemm": t, "comm": t, "unfused": t, "variants": [
        {"mode": "ring", "chunks": 1, "timing": t, "E": 0.5, "attained_saving": None, "ok": False},
        {"mode": "symm_mem", "chunks": 1, "error": "SymmMemUnavailable: no"}]}
    text = format_table([result], "nvlink")
    assert "WRONG" in text and "error: SymmMemUnavailable" in text and "0.50" in text
