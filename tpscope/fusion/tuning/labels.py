"""The labels of `tpscope bench`'s variants: a FusionChoice's label (tpscope.runfolder.fusion_choice,
the one syntax) and the op options only bench varies. Torch-free: result tables are made from
recorded JSON without it."""

from __future__ import annotations

from tpscope.runfolder.fusion_choice import FusionChoice


def variant_label(v: dict, side: str) -> str:
    """A `tpscope bench` variant's label: its FusionChoice's (`chunked/k4`, `ring/k2/m8`;
    `/rank-order` on the AG side only), then the op options bench also varies: `/taper` (the
    exposed piece halved), `/push` or `/pull` (copy_engine's AG), `/tail`."""
    ag_chunked = v["mode"] == "chunked" and side == "ag"
    choice = FusionChoice(
        mode=v["mode"],
        chunks=v.get("chunks", 1),
        sm_margin=v.get("sm_margin", 0),
        comm_ctas=v.get("comm_ctas", 0),
        ring_all_gather=bool(v.get("all_gather")),
        own_first=v.get("own_first", False) if ag_chunked else True,
    )
    label = choice.label
    if v.get("taper"):
        label += "/taper"
    if v["mode"] == "copy_engine" and "push" in v:
        label += "/push" if v["push"] else "/pull"  # a result without `push` pulled
    if v.get("tail_fill"):
        label += "/tail"  # a result without `tail_fill` ran without it
    return label
