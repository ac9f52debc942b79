"""Shape checks of the fused ops, run before any collective so that a bad call fails the same way
on every rank instead of hanging the others in a collective."""

from __future__ import annotations

from typing import Any

from tpscope.runfolder.fusion_choice import CHUNKED_MODES, CUDA_ONLY_MODES, FIXED_MODES


class FusionShapeError(ValueError):
    """Shapes, dtypes, devices or a chunk count that the requested fusion cannot take."""


def _common(a: Any, weight: Any, a_name: str, mode: str, chunks: int) -> None:
    if mode not in FIXED_MODES:
        raise FusionShapeError(f"mode must be one of {', '.join(FIXED_MODES)}, not {mode!r}")
    if not isinstance(chunks, int) or chunks < 1:
        raise FusionShapeError(f"chunks must be an int >= 1, not {chunks!r}")
    if a.dim() != 2 or weight.dim() != 2:
        raise FusionShapeError(
            f"{a_name} and weight must be 2-D, got {tuple(a.shape)} and {tuple(weight.shape)}"
        )
    if a.shape[1] != weight.shape[0]:
        raise FusionShapeError(
            f"{a_name} {tuple(a.shape)} and weight {tuple(weight.shape)}: inner dimensions differ"
        )
    if a.dtype != weight.dtype:
        raise FusionShapeError(f"{a_name} is {a.dtype} but weight is {weight.dtype}")
    if a.device != weight.device:
        raise FusionShapeError(f"{a_name} is on {a.device} but weight is on {weight.device}")
    if mode in CUDA_ONLY_MODES and a.device.type != "cuda":
        raise FusionShapeError(
            f"mode {mode} needs CUDA tensors and NCCL (torch's symmetric memory); "
            "on CPU use none, chunked or ring"
        )


def check_all_gather_matmul(x_shard: Any, weight: Any, tp: int, mode: str, chunks: int) -> None:
    """`x_shard [S/tp, K] @ weight [K, N_local]`; chunked, ring and copy_engine need S/tp % chunks == 0."""
    _common(x_shard, weight, "x_shard", mode, chunks)
    rows = x_shard.shape[0]
    if rows < 1:
        raise FusionShapeError("x_shard has no rows")
    if mode in CHUNKED_MODES and rows % chunks:
        raise FusionShapeError(
            f"x_shard has {rows} rows, which do not split into {chunks} chunks "
            f"(largest legal chunk count divides {rows})"
        )


def check_matmul_reduce_scatter(y: Any, weight: Any, tp: int, mode: str, chunks: int) -> None:
    """`y [S, K_local] @ weight [K_local, N]`, scattered by rows: S % tp == 0, and chunked needs
    (S/tp) % chunks == 0 (ring and copy_engine too)."""
    _common(y, weight, "y", mode, chunks)
    rows = y.shape[0]
    if rows < tp or rows % tp:
        raise FusionShapeError(f"y has {rows} rows, which do not split over {tp} ranks")
    local = rows // tp
    if mode in CHUNKED_MODES and local % chunks:
        raise FusionShapeError(
            f"y has {local} rows per rank, which do not split into {chunks} chunks"
        )
