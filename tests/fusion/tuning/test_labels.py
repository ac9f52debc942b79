"""The labels of bench's variants: the FusionChoice label (its syntax: tests/runfolder/
test_fusion_choice.py) and the op options only bench varies, by hand."""

from __future__ import annotations

from tpscope.fusion.tuning.labels import variant_label


def test_variant_labels():
    assert variant_label({"mode": "chunked", "chunks": 4, "own_first": True}, "ag") == "chunked/k4"
    assert variant_label({"mode": "chunked", "chunks": 4}, "ag") == "chunked/k4/rank-order"
    assert variant_label({"mode": "chunked", "chunks": 4}, "rs") == "chunked/k4"
    assert variant_label({"mode": "ring", "chunks": 1}, "rs") == "ring"
    assert variant_label({"mode": "ring", "chunks": 2}, "rs") == "ring/k2"
    assert variant_label({"mode": "copy_engine", "chunks": 1}, "ag") == "copy_engine"
    assert variant_label({"mode": "copy_engine", "chunks": 2}, "ag") == "copy_engine/k2"
    assert (
        variant_label(
            {"mode": "chunked", "chunks": 2, "own_first": True, "sm_margin": 8, "comm_ctas": 4},
            "ag",
        )
        == "chunked/k2/m8/c4"
    )
    # recorded results: keys absent from older files label as before (pulls, even pieces)
    assert (
        variant_label(
            {"mode": "ring", "chunks": 4, "sm_margin": 16, "taper": True, "all_gather": True}, "rs"
        )
        == "ring/k4/m16/agx/taper"
    )
    assert (
        variant_label({"mode": "copy_engine", "chunks": 2, "push": True}, "ag")
        == "copy_engine/k2/push"
    )
    assert (
        variant_label({"mode": "copy_engine", "chunks": 1, "tail_fill": True}, "ag")
        == "copy_engine/tail"
    )
