"""The model's shape: bad values are refused with a message naming them; the parameter count
against a hand count."""

from __future__ import annotations

import pytest

from tpscope.fusion.model.config import ModelConfig


def test_model_config_checks_heads_and_tp():
    with pytest.raises(ValueError, match="multiple of heads"):
        ModelConfig(hidden=100, heads=3)
    cfg = ModelConfig(hidden=64, heads=4, ffn=96)
    cfg.check_tp(2)
    with pytest.raises(ValueError, match="heads 4 do not divide over tp=3"):
        cfg.check_tp(3)
    with pytest.raises(ValueError, match="ffn 96 does not divide over tp=5"):
        ModelConfig(hidden=80, heads=5, ffn=96).check_tp(5)
    with pytest.raises(ValueError, match="vocab 33 does not divide over tp=2"):
        ModelConfig(hidden=64, heads=4, ffn=96, vocab=33).check_tp(2)


def test_param_count_matches_a_hand_count():
    cfg = ModelConfig(layers=1, hidden=4, ffn=8, heads=2, vocab=10)
    # embed 10*4 + head 4*10 + qkv 4*12 + out 4*4 + fc1 4*8 + fc2 8*4 + norms 4+4 + final norm 4
    assert cfg.param_count() == 40 + 40 + 48 + 16 + 32 + 32 + 8 + 4
