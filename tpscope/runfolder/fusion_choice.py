"""The fusion of one op: how a GEMM and its collective are fused (the mode), in how many pieces,
and how it shares the GPU; and its one label syntax (docs/runtime.md, "The fusion of an op, and its label").

Vocabulary: a *mode* is how a GEMM and its collective are fused; *chunks* is how many pieces the
chunked modes cut the local rows into; a *regime* is an NCCL environment that stands for an
interconnect (tpscope.runfolder.regimes). Torch-free: the CLI, the manifest and the analyzer use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Mode(str, Enum):
    """How a GEMM and its collective are fused."""

    NONE = "none"  # collective, then GEMM (AG side); GEMM, then collective (RS side)
    CHUNKED = "chunked"  # k collectives of row chunks pipelined with k GEMMs
    RING = "ring"  # send/recv ring: own shard first (AG), peer rows first (RS)
    SYMM_MEM = "symm_mem"  # torch's fused_all_gather_matmul / fused_matmul_reduce_scatter
    COPY_ENGINE = (
        "copy_engine"  # peer copies on the copy engines, no SM (tpscope.fusion.ops.copy_engine)
    )
    HOST_STAGED = "host_staged"  # staged through shared host memory on the copy engines (tpscope.fusion.ops.host_staged)
    AUTO = (
        "auto"  # chosen per shape by a timed probe (tpscope.fusion.run.auto); resolved before use
    )


FIXED_MODES: tuple[str, ...] = tuple(m.value for m in Mode if m is not Mode.AUTO)
CUDA_ONLY_MODES: tuple[str, ...] = (Mode.SYMM_MEM.value, Mode.COPY_ENGINE.value)
"""Modes over torch's symmetric memory: CUDA peer access, no CPU path."""
CHUNKED_MODES: tuple[str, ...] = (
    Mode.CHUNKED.value,
    Mode.RING.value,
    Mode.COPY_ENGINE.value,
    Mode.HOST_STAGED.value,
)
"""Modes whose `chunks` cut the local rows (which must divide by it)."""
ALL_MODES: tuple[str, ...] = tuple(m.value for m in Mode)


class Regime(str, Enum):
    """An NCCL environment standing for an interconnect; names fixed by docs/benchmarks.md."""

    NVLINK = "nvlink"
    SHM = "shm"
    SOCKET = "socket"


def check_resources(sm_margin: int, comm_ctas: int) -> None:
    """Refuse a negative SM margin or CTA cap (0 turns either off)."""
    if sm_margin < 0 or comm_ctas < 0:
        raise ValueError(f"sm_margin and comm_ctas must be >= 0, not {sm_margin}, {comm_ctas}")


_RESOURCE_OPTION = {"cli": {"group": "resources"}}
"""An option of `tpscope run` in its group on fusion resources (tpscope.fusion.run.options)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FusionChoice:
    """The fusion of one op: a fixed mode and its chunk count (CHUNKED_MODES read it)."""

    mode: str = field(default=Mode.NONE.value, metadata={"cli": {"choices": ALL_MODES}})
    """Fusion mode.

    One of FIXED_MODES; `auto` is resolved into a FusionChoice before any layer sees it."""
    chunks: int = field(
        default=1, metadata={"cli": {"unset": "{chunks} for chunked, 1 for the other modes"}}
    )
    """Row chunks per rank for `chunked`, `ring` (transfers per ring step), `copy_engine`
    (copies per peer) and `host_staged` (pieces per peer)."""
    own_first: bool = field(default=True, metadata={"cli": False})
    """AG side of `chunked`: multiply this rank's own shard first, while the peers' chunks travel
    (False: each chunk's GEMM covers every rank's rows, the first waiting for the first transfer)."""
    sm_margin: int = field(default=0, metadata=_RESOURCE_OPTION)
    """SMs that the GEMMs beside a transfer leave to the collective (0: all SMs to the GEMM).

    tpscope.fusion.ops.resources."""
    comm_ctas: int = field(default=0, metadata=_RESOURCE_OPTION)
    """Most CTAs the fused ops' NCCL kernels may use, own communicator (0: NCCL's choice)."""
    bwd_overlap: bool = field(default=True, metadata=_RESOURCE_OPTION)
    """Backward overlap: the collective hidden under the layer's weight-gradient GEMM (fused
    modes)."""
    ring_all_gather: bool = field(default=False, metadata=_RESOURCE_OPTION)
    """`ring` GEMM-RS at two ranks: swap each piece by one all-gather instead of send/recv
    (faster transfers, slower GEMMs beside them: docs/benchmarks.md)."""

    def __post_init__(self) -> None:
        if self.mode not in FIXED_MODES:
            raise ValueError(
                f"fusion mode must be one of {', '.join(FIXED_MODES)}, not {self.mode!r}"
            )
        if self.chunks < 1:
            raise ValueError(f"chunks must be >= 1, not {self.chunks}")
        check_resources(self.sm_margin, self.comm_ctas)

    @property
    def overlaps_backward(self) -> bool:
        """Whether the layer's backward overlaps its collective with the weight gradient."""
        return self.bwd_overlap and self.mode != Mode.NONE.value

    def as_record(self) -> dict[str, object]:
        """What a manifest's `fusion_by_layer` records of the choice a layer ran (`bwd_overlap`:
        whether its backward did overlap)."""
        return {
            "mode": self.mode,
            "chunks": self.chunks,
            "sm_margin": self.sm_margin,
            "comm_ctas": self.comm_ctas,
            "bwd_overlap": self.overlaps_backward,
            "ring_all_gather": self.ring_all_gather,
        }

    @property
    def label(self) -> str:
        """The one label syntax (parse_label reads it back): the mode, then `/kN` (chunks: always
        for `chunked`, for `ring` and `copy_engine` when above 1), `/rank-order` (`chunked`
        without own_first), `/mN` (SM margin), `/cN` (CTA cap), `/agx` (the ring's pieces swapped
        by all-gather), `/no-bwd` (a fused mode without backward overlap); each only where it is
        not the default. `chunked/k4`, `ring`, `ring/k2/m16/agx`, `copy_engine/k2`."""
        parts = [self.mode]
        if self.mode == Mode.CHUNKED.value or (self.mode in CHUNKED_MODES and self.chunks > 1):
            parts.append(f"k{self.chunks}")
        if self.mode == Mode.CHUNKED.value and not self.own_first:
            parts.append("rank-order")
        parts += [f"m{self.sm_margin}"] if self.sm_margin else []
        parts += [f"c{self.comm_ctas}"] if self.comm_ctas else []
        parts += ["agx"] if self.ring_all_gather else []
        parts += ["no-bwd"] if not self.bwd_overlap and self.mode != Mode.NONE.value else []
        return "/".join(parts)


_FLAGS = {
    "rank-order": ("own_first", False),
    "agx": ("ring_all_gather", True),
    "no-bwd": ("bwd_overlap", False),
}
_NUMBERS = {"k": "chunks", "m": "sm_margin", "c": "comm_ctas"}


def parse_label(label: str) -> FusionChoice:
    """The FusionChoice a label names (FusionChoice.label's syntax); ValueError, one line naming
    the label and its wrong part, for anything else."""
    mode, *parts = label.strip().split("/")
    fields: dict[str, object] = {"mode": mode}
    for part in parts:
        if part in _FLAGS:
            name, value = _FLAGS[part]
        elif part[:1] in _NUMBERS and part[1:].isdigit():
            name, value = _NUMBERS[part[:1]], int(part[1:])
        else:
            raise ValueError(
                f"fusion label {label!r}: {part!r} is not kN, mN, cN, rank-order, agx or no-bwd"
            )
        if name in fields:
            raise ValueError(f"fusion label {label!r}: {part!r} given twice")
        fields[name] = value
    try:
        return FusionChoice(**fields)
    except ValueError as exc:
        raise ValueError(f"fusion label {label!r}: {exc}") from None
