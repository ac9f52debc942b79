"""A model whose training state cannot fit is refused before any process starts."""

from __future__ import annotations

import pytest

from tpscope.errors import UserError
from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.run import fits
from tpscope.fusion.run.config import RunConfig


def test_training_state_is_four_copies_of_the_parameters_in_the_dtype():
    model = ModelConfig(layers=1, hidden=8, heads=2, ffn=16, vocab=32)
    # by hand: 2*32*8 (embedding, head) + 4*8*8 + 2*8*16 + 2*8 (one block) + 8 (final norm) = 1048
    assert model.param_count() == 1048
    assert (
        fits.training_state_bytes(RunConfig(out_dir="x", model=model, dtype="float32"))
        == 1048 * 4 * 4
    )
    assert (
        fits.training_state_bytes(RunConfig(out_dir="x", model=model, dtype="bfloat16"))
        == 1048 * 2 * 4
    )


def test_a_cpu_run_larger_than_the_host_is_refused_in_one_line(monkeypatch):
    cfg = RunConfig(
        out_dir="x",
        device="cpu",
        dtype="float32",
        model=ModelConfig(layers=1, hidden=8, heads=2, ffn=16, vocab=32),
    )
    monkeypatch.setattr(fits, "host_memory_bytes", lambda: 1048 * 16)  # exactly enough
    fits.check_fits(cfg, 2)
    monkeypatch.setattr(fits, "host_memory_bytes", lambda: 1048 * 16 - 1)
    with pytest.raises(
        UserError, match="needs at least .* GiB for weights, gradients and AdamW state"
    ) as exc:
        fits.check_fits(cfg, 2)
    assert "\n" not in str(exc.value)


def test_host_memory_is_read_from_this_machine():
    have = fits.host_memory_bytes()
    with open("/proc/meminfo") as fh:
        total_kib = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    assert have is not None and 0 < have <= total_kib * 1024
