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


HOST_LOCAL_MODES: tuple[str, ...] = ("host_staged",)
"""Modes whose transfers go through memory shared by the ranks of one host."""


def check_host_local(hosts: list[str], devices: list[str]) -> None:
    """Mode host_staged (tpscope.fusion.ops.host_shm): every rank of the group on one host, and all of
    them on CPU or all on CUDA; `hosts` and `devices` are per rank of the group (every rank sees
    the same lists, so every rank refuses the same way)."""
    if len(set(hosts)) > 1:
        spread = ", ".join(f"rank {r} on {h}" for r, h in enumerate(hosts))
        raise FusionShapeError(
            f"mode host_staged needs every rank of its group on one host (it stages the "
            f"transfers through shared host memory); {spread}"
        )
    if len(set(devices)) > 1:
        spread = ", ".join(f"rank {r} on {d}" for r, d in enumerate(devices))
        raise FusionShapeError(
            f"mode host_staged needs every rank's tensors on the same kind of device; {spread}"
        )


def check_nodes(mode: str, nodes: int) -> None:
    """Refuse a host-local mode for a group of ranks on `nodes` > 1 hosts, before any process starts."""
    if mode in HOST_LOCAL_MODES and nodes > 1:
        raise FusionShapeError(
            f"--mode {mode} stages transfers through one host's shared memory, so its ranks "
            f"must be on one node, not {nodes} (docs/runtime.md says what a cross-node "
            "version needs)"
        )
