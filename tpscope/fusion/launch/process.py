"""Process setup of a rank, the one place for it (`tpscope run`'s worker and `tpscope bench`):
the regime's and the safety NCCL variables set in this process, then the process group joined
(NCCL on CUDA, gloo on CPU) with the run's collective timeout."""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from tpscope.errors import UserError
from tpscope.runfolder.regimes import apply_defaults, apply_in_process, infer_regime

CPU_REGIME = "gloo"  # what a CPU run records as its regime: gloo over TCP, no NCCL environment


def resolve_regime(regime: str, environ: Mapping[str, str], device: str = "cuda") -> str:
    """The regime name to record: the one asked for, else the one the environment amounts to
    (a CPU run's, gloo's, whatever NCCL variables are set)."""
    if device == "cpu":
        return regime or CPU_REGIME
    return regime or infer_regime(environ)


@dataclass(frozen=True, slots=True)
class Joined:
    """This process as a rank of the group it joined."""

    rank: int
    world: int
    device: torch.device
    backend: str  # nccl or gloo
    regime: str  # the regime recorded (resolve_regime)


def join_group(regime: str, device: str, timeout_s: float) -> Joined:
    """Set the regime's variables (`regime` '' keeps the inherited ones) and the safety ones in
    this process, then init_process_group before any NCCL communicator exists."""
    recorded = resolve_regime(regime, os.environ, device)
    if regime:
        apply_in_process(regime, os.environ)
    apply_defaults(os.environ)
    timeout = datetime.timedelta(seconds=timeout_s)
    if device == "cuda":
        if not torch.cuda.is_available():
            raise UserError("--device cuda but torch sees no GPU (use --device cpu)")
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", timeout=timeout, device_id=dev)
        backend = "nccl"
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
        backend = "gloo"
    return Joined(dist.get_rank(), dist.get_world_size(), dev, backend, recorded)
