"""Configuration of the fused-TP runtime: frozen dataclasses (the fusion of one op and its
vocabulary are tpscope.runfolder.fusion_choice's). No torch here: the CLI parses options
without importing it.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace

from tpscope.fusion.model.config import ModelConfig
from tpscope.runfolder.fusion_choice import (
    CHUNKED_MODES,
    FusionChoice,
    Mode,
    Regime,
)

DEFAULT_FUSION = FusionChoice(mode=Mode.CHUNKED.value, chunks=4)
"""A run's fusion unless told: chunked in 4 row chunks, every SM to the GEMMs, NCCL's CTAs."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunConfig:
    """One `tpscope run`: what to train, how to fuse it, where to write the run folder."""

    out_dir: str
    """The run folder (traces and tpscope_run.jsonc)."""
    fusion: FusionChoice = DEFAULT_FUSION
    """How every layer's ops are fused; with `auto`, the options (SM margin, CTA cap, backward
    overlap) every candidate of the probe takes, its mode `none`."""
    auto: bool = False
    """Choose each layer kind's fusion by a timed probe at start-up (tpscope.fusion.run.auto)."""
    regime: str = ""
    """NCCL environment (docs/benchmarks.md); '' keeps the inherited one (its regime is inferred)."""
    device: str = "cuda"
    """`cuda` (NCCL) or `cpu` (gloo)."""
    dtype: str = "bfloat16"
    """Parameter and activation dtype: bfloat16 or float32."""
    model: ModelConfig = field(default_factory=ModelConfig)
    seq_len: int = 256
    """Tokens per sequence L."""
    batch: int = 4
    """Sequences per step (the global batch: every TP rank sees the same batch)."""
    steps: int = 8
    """Training steps in all."""
    profile_wait: int = 1
    """Profiler schedule: steps skipped before warm-up."""
    profile_warmup: int = 1
    """Profiler schedule: steps traced but discarded."""
    profile_active: int = 2
    """Profiler schedule: steps written to the traces (0 turns the profiler off)."""
    lr: float = 3e-4
    """AdamW peak learning rate (after the warm-up, before the cosine decay)."""
    warmup_steps: int | None = None
    """Linear learning-rate warm-up; None: a tenth of the steps, at least 1."""
    decay_to: float = 0.1
    """The cosine decay ends at `lr * decay_to` on the last step."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this (0 turns clipping off)."""
    weight_decay: float = 0.1
    """AdamW's decoupled weight decay."""
    seed: int = 0
    """Seed of weights and synthetic tokens (the same on every rank)."""
    timeout_s: float = 300.0
    """Collective timeout: a dead rank makes the others fail after this long instead of hanging."""
    auto_cache: str = ""
    """File of cached `auto` probes ('' = the default under ~/.cache/tpscope)."""
    embed_overlap: bool = True
    """The embedding's backward all-gather runs beside the optimizer update of the other
    parameters (when the head is fused with backward overlap; never for `none`)."""

    @property
    def mode(self) -> str:
        """`auto`, or the fixed mode of `fusion` (ALL_MODES)."""
        return Mode.AUTO.value if self.auto else self.fusion.mode

    def choice(self, mode: str, chunks: int) -> FusionChoice:
        """A fixed mode's FusionChoice under this run's options (chunks only where the mode cuts rows)."""
        return replace(self.fusion, mode=mode, chunks=chunks if mode in CHUNKED_MODES else 1)

    def __post_init__(self) -> None:
        if not isinstance(self.fusion, FusionChoice):
            raise ValueError(f"fusion must be a FusionChoice, not {self.fusion!r}")
        if self.regime and self.regime not in {r.value for r in Regime}:
            raise ValueError(f"regime must be nvlink, shm or socket, not {self.regime!r}")
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device must be cuda or cpu, not {self.device!r}")
        if self.dtype not in ("bfloat16", "float32"):
            raise ValueError(f"dtype must be bfloat16 or float32, not {self.dtype!r}")
        for name in ("seq_len", "batch", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)}")
        for name in ("profile_wait", "profile_warmup", "profile_active"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        if (
            self.profile_active
            and self.profile_wait + self.profile_warmup + self.profile_active > self.steps
        ):
            raise ValueError(
                f"steps={self.steps} is fewer than the profiler schedule needs "
                f"(wait {self.profile_wait} + warmup {self.profile_warmup} + active {self.profile_active})"
            )
        for name in ("timeout_s", "lr"):  # `not > 0` also refuses NaN
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number > 0, not {value}")
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(
                f"warmup_steps must be between 0 and steps={self.steps}, not {self.warmup_steps}"
            )
        if not (
            self.lr > 0
            and 0 <= self.decay_to <= 1
            and self.grad_clip >= 0
            and self.weight_decay >= 0
        ):
            raise ValueError(
                f"need lr > 0, 0 <= decay_to <= 1, grad_clip >= 0 and weight_decay >= 0; got lr={self.lr}, "
                f"decay_to={self.decay_to}, grad_clip={self.grad_clip}, weight_decay={self.weight_decay}"
            )

    @property
    def tokens_per_step(self) -> int:
        """Tokens of one global batch."""
        return self.seq_len * self.batch

    def check_world(self, tp: int) -> None:
        """Refuse a world size the model or the batch cannot be split over (before any collective)."""
        self.model.check_tp(tp)
        if self.tokens_per_step % tp:
            raise ValueError(
                f"seq_len*batch = {self.tokens_per_step} tokens do not divide over tp={tp}"
            )
        local = self.tokens_per_step // tp
        if self.mode in CHUNKED_MODES and local % self.fusion.chunks:
            raise ValueError(
                f"{local} tokens per rank do not split into {self.fusion.chunks} chunks (seq_len*batch/tp % chunks != 0)"
            )


RUN_DEFAULTS = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}
"""Each field's default, for the command-line options of `run` and `sweep` (the one place they live)."""


def default_chunks(mode: str) -> int:
    """The chunk count a mode runs with unless told: DEFAULT_FUSION's for `chunked`, 1 for the
    others (`ring`: one transfer per step; `copy_engine`: one copy per peer; `auto` probes its own)."""
    return DEFAULT_FUSION.chunks if mode == Mode.CHUNKED.value else 1


def config_to_json(cfg: RunConfig) -> str:
    """A RunConfig as JSON (how the launcher hands it to the torchrun workers)."""
    return json.dumps(asdict(cfg))


def config_from_json(text: str) -> RunConfig:
    """The inverse of config_to_json."""
    raw = json.loads(text)
    raw["model"] = ModelConfig(**raw["model"])
    raw["fusion"] = FusionChoice(**raw["fusion"])
    return RunConfig(**raw)
