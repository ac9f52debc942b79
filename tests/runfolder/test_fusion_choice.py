"""The fusion of one op and its one label syntax: printed by FusionChoice.label, read back by
parse_label; anything else is refused in one line naming the label and its wrong part."""

from __future__ import annotations

import itertools

import pytest

from tpscope.runfolder.fusion_choice import FIXED_MODES, FusionChoice, parse_label


def test_fusion_choice_refuses_unknown_mode_and_auto():
    with pytest.raises(ValueError, match="fusion mode"):
        FusionChoice(mode="fast")
    with pytest.raises(ValueError, match="fusion mode"):
        FusionChoice(mode="auto")  # auto is resolved before a layer sees it
    with pytest.raises(ValueError, match="chunks"):
        FusionChoice(mode="chunked", chunks=0)


@pytest.mark.parametrize(
    "choice, label",
    [
        (FusionChoice(mode="none"), "none"),
        (FusionChoice(mode="chunked", chunks=4), "chunked/k4"),
        (FusionChoice(mode="chunked", chunks=1), "chunked/k1"),  # chunked always says its k
        (FusionChoice(mode="ring"), "ring"),
        (
            FusionChoice(mode="ring", chunks=2, sm_margin=16, ring_all_gather=True),
            "ring/k2/m16/agx",
        ),
        (
            FusionChoice(mode="chunked", chunks=2, own_first=False, comm_ctas=4),
            "chunked/k2/rank-order/c4",
        ),
        (FusionChoice(mode="copy_engine", chunks=2, bwd_overlap=False), "copy_engine/k2/no-bwd"),
        (
            FusionChoice(mode="none", bwd_overlap=False),
            "none",
        ),  # unfused never overlaps: nothing to say
        (FusionChoice(mode="symm_mem"), "symm_mem"),
    ],
)
def test_labels_by_hand(choice, label):
    assert choice.label == label


def test_every_label_reads_back_as_its_choice():
    seen = set()
    for mode, k, m, c, own, agx, bwd in itertools.product(
        FIXED_MODES, (1, 2, 8), (0, 16), (0, 4), (True, False), (False, True), (True, False)
    ):
        choice = FusionChoice(
            mode=mode,
            chunks=k,
            sm_margin=m,
            comm_ctas=c,
            own_first=own,
            ring_all_gather=agx,
            bwd_overlap=bwd,
        )
        back = parse_label(choice.label)
        assert back.label == choice.label
        seen.add(choice.label)
        # what the label leaves out is what changes nothing for that mode
        if mode == "chunked":
            assert back == choice if bwd else back.own_first == own
    assert len(seen) > 100


@pytest.mark.parametrize(
    "label, wrong",
    [
        ("fast", "fusion mode"),
        ("ring/x2", "'x2'"),
        ("ring/k2/k4", "given twice"),
        ("chunked/k0", "chunks"),
        ("ring/kx", "'kx'"),
    ],
)
def test_bad_labels_are_one_line_errors(label, wrong):
    with pytest.raises(ValueError, match=wrong) as got:
        parse_label(label)
    assert str(got.value).startswith(f"fusion label {label!r}") and "\n" not in str(got.value)
