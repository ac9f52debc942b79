"""Comparing a fused run with its unfused baseline: Flux overlap efficiency, attained saving (metrics.md §9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tpscope.metrics.breakdown import StepBreakdown
from tpscope.metrics.critical_path import CriticalPath
from tpscope.metrics.flux import attained_saving, flux_overlap_efficiency


@dataclass(frozen=True, slots=True)
class RunTimes:
    """The times §9 compares, in µs: means over steps."""

    step_us: float | None  # T: mean critical-path length
    compute_us: float | None  # T_comp: per step the max over ranks of compute_us
    comm_us: float | None  # T_comm: per step the max over ranks of comm_transfer_us (else comm_us)


def run_times(paths: Sequence[CriticalPath], steps: Sequence[StepBreakdown]) -> RunTimes:
    """T, T_comp and T_comm of one run."""
    step_us = float(np.mean([p.length_us for p in paths])) if paths else None
    comp: dict[int, float] = {}
    comm: dict[int, float] = {}
    for s in steps:
        comp[s.step] = max(comp.get(s.step, 0.0), s.compute_us)
        moved = s.comm_transfer_us if s.comm_transfer_us is not None else s.comm_us
        comm[s.step] = max(comm.get(s.step, 0.0), moved)
    return RunTimes(
        step_us=step_us,
        compute_us=float(np.mean(list(comp.values()))) if comp else None,
        comm_us=float(np.mean(list(comm.values()))) if comm else None,
    )


def compare(fused: RunTimes, base: RunTimes) -> tuple[float | None, float | None]:
    """(flux_overlap_efficiency, attained_saving) of `fused` against `base` (§9)."""
    if fused.step_us is None or base.step_us is None or base.compute_us is None:
        return None, None
    # overlap of nothing: only where both runs communicate
    if not fused.comm_us or not base.comm_us:
        return None, None
    flux = flux_overlap_efficiency(fused.step_us, base.step_us, base.compute_us)
    saving = (
        attained_saving(fused.step_us, base.step_us, base.compute_us, base.comm_us)
        if base.comm_us is not None
        else None
    )
    return flux, saving
