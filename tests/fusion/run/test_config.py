"""Config validation: bad values are refused with a message naming them."""

from __future__ import annotations

import pytest

from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.run.config import RunConfig, config_from_json, config_to_json
from tpscope.runfolder.fusion_choice import FusionChoice


def test_run_config_refuses_a_profiler_schedule_longer_than_the_run():
    with pytest.raises(ValueError, match="profiler schedule"):
        RunConfig(out_dir="x", steps=3, profile_wait=1, profile_warmup=1, profile_active=2)
    RunConfig(out_dir="x", steps=3, profile_active=0)  # no profiler: any step count


def test_check_world_refuses_tokens_that_do_not_split():
    cfg = RunConfig(
        out_dir="x",
        seq_len=6,
        batch=1,
        model=ModelConfig(hidden=8, heads=2, ffn=8),
        fusion=FusionChoice(mode="chunked", chunks=4),
    )
    with pytest.raises(ValueError, match="do not split into 4 chunks"):
        cfg.check_world(2)  # 3 tokens per rank
    with pytest.raises(ValueError, match="do not divide over tp=4"):
        cfg.check_world(4)
    copies = RunConfig(
        out_dir="x",
        seq_len=6,
        batch=1,
        model=ModelConfig(hidden=8, heads=2, ffn=8),
        fusion=FusionChoice(mode="copy_engine", chunks=2),
    )
    with pytest.raises(ValueError, match="do not split into 2 chunks"):
        copies.check_world(2)  # copy_engine cuts each peer's 3 rows into 2 copies
    RunConfig(
        out_dir="x",
        seq_len=6,
        batch=1,
        model=ModelConfig(hidden=8, heads=2, ffn=8),
        fusion=FusionChoice(mode="symm_mem", chunks=2),
    ).check_world(2)  # symm_mem ignores chunks


def test_fusion_keeps_chunks_only_for_modes_that_cut_rows():
    cfg = RunConfig(out_dir="x", fusion=FusionChoice(sm_margin=8))
    assert cfg.choice("copy_engine", 2).chunks == 2 and cfg.choice("ring", 4).chunks == 4
    assert cfg.choice("symm_mem", 4).chunks == 1 and cfg.choice("none", 4).chunks == 1
    assert cfg.choice("ring", 4).sm_margin == 8  # the run's options


def test_mode_is_auto_or_the_fusions():
    assert RunConfig(out_dir="x").mode == "chunked" and RunConfig(out_dir="x").fusion.chunks == 4
    assert RunConfig(out_dir="x", auto=True).mode == "auto"
    assert RunConfig(out_dir="x", fusion=FusionChoice(mode="ring")).mode == "ring"


def test_bad_options_are_refused():
    for kwargs, word in [
        ({"fusion": "chunked"}, "fusion"),
        ({"regime": "ib"}, "regime"),
        ({"device": "tpu"}, "device"),
        ({"dtype": "fp8"}, "dtype"),
        ({"steps": 0}, "steps"),
        ({"timeout_s": 0}, "timeout_s"),
    ]:
        with pytest.raises(ValueError, match=word):
            RunConfig(out_dir="x", **kwargs)


def test_json_round_trip():
    cfg = RunConfig(
        out_dir="o",
        model=ModelConfig(layers=3),
        seq_len=64,
        fusion=FusionChoice(mode="ring", chunks=2),
        auto=True,
    )
    assert config_from_json(config_to_json(cfg)) == cfg


@pytest.mark.parametrize(
    "field, value",
    [
        ("timeout_s", float("nan")),
        ("timeout_s", float("inf")),
        ("timeout_s", -1.0),
        ("lr", -1.0),
        ("lr", 0.0),
        ("lr", float("nan")),
    ],
)
def test_non_finite_or_non_positive_timeout_and_lr_are_refused(field, value):
    with pytest.raises(ValueError, match=f"{field} must be a finite number > 0"):
        RunConfig(out_dir="x", **{field: value})
