"""Bench helpers: the variants timed, the printed table."""

from __future__ import annotations

import torch

from tpscope.fusion.tuning.bench import BenchConfig, format_table, variants
from tpscope.fusion.tuning.labels import variant_label


def _short(vs):
    return [(v["mode"], v["chunks"], v["own_first"], v["sm_margin"], v["comm_ctas"]) for v in vs]


def test_variants_drop_illegal_chunks_and_symm_mem_on_cpu():
    cfg = BenchConfig(
        modes=("chunked", "ring", "symm_mem"), chunks=(2, 3, 4), ring_chunks=(1, 3, 8)
    )
    assert _short(variants(cfg, 8, torch.device("cpu"))) == [
        ("chunked", 2, True, 0, 0),
        ("chunked", 4, True, 0, 0),
        ("ring", 1, True, 0, 0),
        ("ring", 8, True, 0, 0),
    ]
    assert ("symm_mem", 1, True, 0, 0) in _short(variants(cfg, 8, torch.device("cuda")))
    copies = BenchConfig(modes=("copy_engine",), ring_chunks=(1, 2, 3), sm_margins=(0, 8))
    assert _short(variants(copies, 8, torch.device("cpu"))) == []
    # copies per peer come from the ring counts; margins do not apply (no SM moves the data)
    assert _short(variants(copies, 8, torch.device("cuda"))) == [
        ("copy_engine", 1, True, 0, 0),
        ("copy_engine", 2, True, 0, 0),
    ]
    both = BenchConfig(modes=("chunked",), chunks=(2,), rank_order=True)
    assert _short(variants(both, 8, torch.device("cpu"), "ag")) == [
        ("chunked", 2, True, 0, 0),
        ("chunked", 2, False, 0, 0),
    ]
    assert _short(variants(both, 8, torch.device("cpu"), "rs")) == [("chunked", 2, True, 0, 0)]


def test_margins_and_cta_caps_multiply_chunked_and_ring_only():
    cfg = BenchConfig(
        modes=("chunked", "ring", "symm_mem"), chunks=(2,), sm_margins=(0, 8), comm_ctas=(0, 4)
    )
    got = _short(variants(cfg, 8, torch.device("cuda")))
    expected = [("chunked", 2, True, m, c) for c in (0, 4) for m in (0, 8)]
    expected += [("ring", 1, True, m, c) for c in (0, 4) for m in (0, 8)]
    assert got == expected + [("symm_mem", 1, True, 0, 0)]


def test_tapers_pushes_and_exchanges_multiply_the_variants_they_apply_to():
    def labels(cfg, side, device="cuda"):
        return [variant_label(v, side) for v in variants(cfg, 8, torch.device(device), side)]

    # by default each mode runs with its own taper (the ring's pieces tapered), and says so
    plain = BenchConfig(modes=("chunked", "ring"), chunks=(1, 4), ring_chunks=(1, 4))
    assert labels(plain, "ag", "cpu") == ["chunked/k1", "chunked/k4", "ring", "ring/k4/taper"]
    # both tapers where asked, only where a chunk count above one gives a piece to taper
    both = BenchConfig(
        modes=("chunked", "ring"), chunks=(1, 4), ring_chunks=(4,), tapers=(False, True)
    )
    assert labels(both, "rs", "cpu") == [
        "chunked/k1",
        "chunked/k4",
        "chunked/k4/taper",
        "ring/k4",
        "ring/k4/taper",
    ]
    # the all-gather exchange is a GEMM-RS ring option only
    agx = BenchConfig(
        modes=("ring",), ring_chunks=(4,), tapers=(True,), ring_all_gather=(False, True)
    )
    assert labels(agx, "rs", "cpu") == ["ring/k4/taper", "ring/k4/agx/taper"]
    assert labels(agx, "ag", "cpu") == ["ring/k4/taper"]
    # push and pull are copy_engine's AG side; its GEMM-RS has no such variant
    copies = BenchConfig(modes=("copy_engine",), ring_chunks=(1,), copy_push=(False, True))
    assert labels(copies, "ag") == ["copy_engine/pull", "copy_engine/push"]
    assert labels(copies, "rs") == ["copy_engine"]


def test_table_marks_a_wrong_output():
    t = {"median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1}
    result = {
        "S": 8,
        "H": 4,
        "F": 8,
        "side": "ag",
        "gemm": t,
        "comm": t,
        "unfused": t,
        "variants": [
            {
                "mode": "ring",
                "chunks": 1,
                "timing": t,
                "E": 0.5,
                "attained_saving": None,
                "ok": False,
            },
            {"mode": "symm_mem", "chunks": 1, "error": "SymmMemUnavailable: no"},
        ],
    }
    text = format_table([result], "nvlink")
    assert "WRONG" in text and "error: SymmMemUnavailable" in text and "0.50" in text


def test_host_staged_is_timed_at_the_piece_counts_on_cpu_too():
    cfg = BenchConfig(
        modes=("host_staged",), ring_chunks=(1, 2, 3), sm_margins=(0, 8), copy_push=(False, True)
    )
    for device in ("cpu", "cuda"):  # it has a CPU path; margins and push do not apply to it
        assert [
            (v["mode"], v["chunks"], v["sm_margin"], "push" in v)
            for v in variants(cfg, 8, torch.device(device))
        ] == [("host_staged", 1, 0, False), ("host_staged", 2, 0, False)]
    assert variant_label({"mode": "host_staged", "chunks": 2}, "rs") == "host_staged/k2"
    assert variant_label({"mode": "host_staged", "chunks": 1}, "ag") == "host_staged"
