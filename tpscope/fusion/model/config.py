"""The shape of the small tensor-parallel transformer. No torch here: the CLI parses options
without importing it."""

from __future__ import annotations

from dataclasses import dataclass, field

_MODEL_OPTION = {"cli": {"group": "model"}}
"""Each field is an option of `tpscope run` in its "model" group (tpscope.fusion.run.options)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    """Shape of the small tensor-parallel transformer (attention + MLP blocks, RMSNorm)."""

    layers: int = field(default=2, metadata=_MODEL_OPTION)
    """Transformer blocks."""
    hidden: int = field(default=256, metadata=_MODEL_OPTION)
    """Model width H."""
    ffn: int = field(default=1024, metadata=_MODEL_OPTION)
    """MLP width F (each rank holds F/tp)."""
    heads: int = field(default=4, metadata=_MODEL_OPTION)
    """Attention heads (each rank holds heads/tp)."""
    vocab: int = field(default=512, metadata=_MODEL_OPTION)
    """Vocabulary of the synthetic tokens."""

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "ffn", "heads", "vocab"):
            if getattr(self, name) < 1:
                raise ValueError(f"model {name} must be >= 1, not {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")

    def check_tp(self, tp: int) -> None:
        """Refuse a tensor-parallel degree that does not divide the sharded dimensions."""
        if self.heads % tp:
            raise ValueError(f"heads {self.heads} do not divide over tp={tp}")
        if self.ffn % tp:
            raise ValueError(f"ffn {self.ffn} does not divide over tp={tp}")
        if self.vocab % tp:
            raise ValueError(f"vocab {self.vocab} does not divide over tp={tp}")

    def param_count(self) -> int:
        """Parameters of the full (unsharded) model."""
        h, f, v = self.hidden, self.ffn, self.vocab
        per_block = 4 * h * h + 2 * h * f + 2 * h
        return 2 * v * h + self.layers * per_block + h
