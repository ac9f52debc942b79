"""`run`'s options are RunConfig's fields: one option per field (the others named), each setting
its field, its help the field's docstring."""

import argparse

import pytest

from tpscope.errors import UserError
from tpscope.fusion.run.command import NON_FIELD_OPTIONS, add_arguments, config_from_args
from tpscope.fusion.run.config import RunConfig
from tpscope.fusion.run.options import field_options

# The fields of RunConfig (its model's, its fusion's) that are no option of `run`; adding a field
# means adding an option for it, or naming it here.
NOT_OPTIONS = {
    "auto",  # `--mode auto`
    "fusion.own_first",
    "profile_wait",
    "profile_warmup",
    "decay_to",
    "weight_decay",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def _paths(cls, prefix=""):
    from dataclasses import fields, is_dataclass

    out = set()
    for f in fields(cls):
        default = f.default_factory() if callable(f.default_factory) else f.default
        if is_dataclass(default):
            out |= _paths(type(default), f"{prefix}{f.name}.")
        else:
            out.add(prefix + f.name)
    return out


def test_no_option_without_a_field_and_no_field_without_an_option():
    flags = {s for a in _parser()._actions for s in a.option_strings} - {"-h", "--help"}
    by_field = {o.flag for o in field_options(RunConfig)}
    assert flags - by_field == set(NON_FIELD_OPTIONS)
    assert {o.path for o in field_options(RunConfig)} == _paths(RunConfig) - NOT_OPTIONS


# (command line, the field it sets, the value it must hold): written out, not derived
SETS = [
    (["--out", "x"], "out_dir", None),  # config_from_args takes the folder from its caller
    (["--mode", "ring"], "fusion.mode", "ring"),
    (["--chunks", "2"], "fusion.chunks", 2),
    (["--sm-margin", "8"], "fusion.sm_margin", 8),
    (["--comm-ctas", "4"], "fusion.comm_ctas", 4),
    (["--no-bwd-overlap"], "fusion.bwd_overlap", False),
    (["--ring-all-gather"], "fusion.ring_all_gather", True),
    (["--regime", "shm"], "regime", "shm"),
    (["--device", "cpu"], "device", None),  # the caller resolves it (torch may be asked)
    (["--dtype", "float32"], "dtype", "float32"),
    (["--layers", "3"], "model.layers", 3),
    (["--hidden", "512"], "model.hidden", 512),
    (["--ffn", "2048"], "model.ffn", 2048),
    (["--heads", "8"], "model.heads", 8),
    (["--vocab", "1024"], "model.vocab", 1024),
    (["--seq-len", "128"], "seq_len", 128),
    (["--batch", "2"], "batch", 2),
    (["--steps", "9"], "steps", 9),
    (["--profile-steps", "3"], "profile_active", 3),
    (["--lr", "0.001"], "lr", 0.001),
    (["--warmup-steps", "2"], "warmup_steps", 2),
    (["--grad-clip", "0.5"], "grad_clip", 0.5),
    (["--seed", "7"], "seed", 7),
    (["--timeout-s", "60"], "timeout_s", 60.0),
    (["--auto-cache", "probes.json"], "auto_cache", "probes.json"),
    (["--no-embed-overlap"], "embed_overlap", False),
]


def _get(cfg, path):
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


@pytest.mark.parametrize("argv, path, value", SETS, ids=[s[0][0] for s in SETS])
def test_each_option_sets_its_field_alone(argv, path, value):
    if path == "fusion.chunks":
        argv = [*argv, "--mode", "chunked"]
    default = config_from_args(_parser().parse_args([]), "cuda", "out")
    cfg = config_from_args(_parser().parse_args(argv), "cuda", "out")
    if value is not None:
        assert _get(cfg, path) == value != _get(default, path)
    changed = {p for p in _paths(RunConfig) if _get(cfg, p) != _get(default, p)}
    assert changed <= {path, "fusion.mode", "fusion.chunks", "profile_wait", "profile_warmup"}
    assert {p.path for p in field_options(RunConfig) if p.flag == argv[0]} == {path}


def test_the_help_is_the_docstring_and_the_default():
    helps = {a.option_strings[0]: a.help for a in _parser()._actions}
    assert helps["--layers"] == "transformer blocks (default %(default)s)"
    assert helps["--ffn"] == "MLP width F (each rank holds F/tp; default %(default)s)"
    assert helps["--profile-steps"] == (
        "steps written to the traces after 1 wait and 1 warm-up step (0: no profiler; "
        "default %(default)s)"
    )
    assert helps["--dtype"] == (
        "parameter and activation dtype (default: bfloat16 on cuda, float32 on cpu)"
    )
    assert helps["--no-embed-overlap"].startswith("turn off the embedding gradient's all-gather")
    assert "default: 4 for chunked" in helps["--chunks"]


def test_a_refusal_names_the_option():
    with pytest.raises(UserError, match=r"^--warmup-steps must be between 0 and steps=8"):
        config_from_args(_parser().parse_args(["--warmup-steps", "99"]), "cuda", "o")
    with pytest.raises(UserError, match=r"^--profile-steps must be >= 0"):
        config_from_args(_parser().parse_args(["--profile-steps", "-1"]), "cuda", "o")
