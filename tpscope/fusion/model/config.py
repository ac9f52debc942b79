"""The shape of the small tensor-parallel transformer. No torch here: the CLI parses options
without importing it."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    """Shape of the small tensor-parallel transformer (attention + MLP blocks, RMSNorm)."""

    layers: int = 2
    """Transformer blocks."""
    hidden: int = 256
    """Model width H."""
    ffn: int = 1024
    """MLP inner width F (each rank holds F/tp)."""
    heads: int = 4
    """Attention heads (each rank holds heads/tp)."""
    vocab: int = 512
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


MODEL_DEFAULTS = {f.name: f.default for f in fields(ModelConfig) if f.default is not MISSING}
"""Each field's default, for the command-line options."""
