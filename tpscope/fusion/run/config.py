"""Configuration of the fused-TP runtime: frozen dataclasses (the fusion of one op and its
vocabulary are tpscope.runfolder.fusion_choice's). No torch here: the CLI parses options
without importing it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace

from tpscope.fusion.model.config import ModelConfig
from tpscope.runfolder.fusion_choice import (
    CHUNKED_MODES,
    FusionChoice,
    Mode,
    Regime,
)

DEVICES = ("cuda", "cpu")
"""Where the ranks run: `cuda` (NCCL) or `cpu` (gloo)."""
DTYPES = ("bfloat16", "float32")
"""The parameter and activation dtypes."""

DEFAULT_FUSION = FusionChoice(mode=Mode.CHUNKED.value, chunks=4)
"""A run's fusion unless told: chunked in 4 row chunks, every SM to the GEMMs, NCCL's CTAs."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunConfig:
    """One `tpscope run`: what to train, how to fuse it, where to write the run folder."""

    out_dir: str = field(
        metadata={"cli": {"flag": "--out", "metavar": "DIR", "unset": "runs/<time>-<mode>"}}
    )
    """The run folder (traces and tpscope_run.jsonc)."""
    fusion: FusionChoice = DEFAULT_FUSION
    """How every layer's ops are fused; with `auto`, the options (SM margin, CTA cap, backward
    overlap) every candidate of the probe takes, its mode `none`."""
    auto: bool = field(default=False, metadata={"cli": False})  # `--mode auto`
    """Choose each layer kind's fusion by a timed probe at start-up (tpscope.fusion.run.auto)."""
    regime: str = field(default="", metadata={"cli": {"choices": [r.value for r in Regime]}})
    """NCCL environment standing for an interconnect: nvlink (none), shm (NCCL_P2P_DISABLE=1),
    socket (also NCCL_SHM_DISABLE=1); docs/runtime.md (default: keep the inherited one).

    '' keeps the inherited one; its regime is then inferred."""
    device: str = field(
        default="cuda",
        metadata={"cli": {"choices": DEVICES, "unset": "cuda if torch sees a GPU, else cpu"}},
    )
    """Where the ranks run: cuda with NCCL, or cpu with gloo."""
    dtype: str = field(
        default="bfloat16",
        metadata={
            "cli": {
                "group": "model",
                "choices": DTYPES,
                "unset": "bfloat16 on cuda, float32 on cpu",
            }
        },
    )
    """Parameter and activation dtype."""
    model: ModelConfig = field(default_factory=ModelConfig)
    seq_len: int = field(default=256, metadata={"cli": {"group": "model"}})
    """Tokens per sequence L."""
    batch: int = field(default=4, metadata={"cli": {"group": "model"}})
    """Sequences per step, global (every TP rank sees the same batch)."""
    steps: int = 8
    """Training steps."""
    profile_wait: int = field(default=1, metadata={"cli": False})
    """Profiler schedule: steps skipped before warm-up."""
    profile_warmup: int = field(default=1, metadata={"cli": False})
    """Profiler schedule: steps traced but discarded."""
    profile_active: int = field(default=2, metadata={"cli": {"flag": "--profile-steps"}})
    """Steps written to the traces after {profile_wait} wait and {profile_warmup} warm-up step
    (0: no profiler)."""
    lr: float = field(default=3e-4, metadata={"cli": {"group": "model"}})
    """AdamW peak learning rate: linear warm-up, then cosine decay to {decay_to} of it."""
    warmup_steps: int | None = field(
        default=None,
        metadata={"cli": {"group": "model", "unset": "a tenth of --steps, at least 1"}},
    )
    """Learning-rate warm-up steps, linear.

    None: a tenth of the steps, at least 1."""
    decay_to: float = field(default=0.1, metadata={"cli": False})
    """The cosine decay ends at `lr * decay_to` on the last step."""
    grad_clip: float = field(default=1.0, metadata={"cli": {"group": "model"}})
    """Clip the global gradient norm to this (0: off, which lets the embedding gradient travel
    beside the optimizer on CUDA)."""
    weight_decay: float = field(default=0.1, metadata={"cli": False})
    """AdamW's decoupled weight decay."""
    seed: int = field(default=0, metadata={"cli": {"group": "model"}})
    """Seed of weights and synthetic tokens (the same on every rank)."""
    timeout_s: float = 300.0
    """Collective timeout in seconds: a dead rank fails the others after this long instead of
    hanging."""
    auto_cache: str = field(default="", metadata={"cli": {"metavar": "FILE"}})
    """File of `--mode auto` probes (default $XDG_CACHE_HOME/tpscope/auto_probe.json, else
    ~/.cache/tpscope/auto_probe.json).

    '' = that default."""
    embed_overlap: bool = field(default=True, metadata={"cli": {"group": "resources"}})
    """The embedding gradient's all-gather beside the optimizer update of the other parameters.

    Only when the head is fused with backward overlap; never for `none`."""

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
        if self.device not in DEVICES:
            raise ValueError(f"device must be cuda or cpu, not {self.device!r}")
        if self.dtype not in DTYPES:
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
