"""Step windows of one rank (metrics.md §3)."""

from __future__ import annotations

import re

import numpy as np

from tpscope.trace.columns import MISSING, containing
from tpscope.trace.tables import GpuActivities, Ranges, StepWindows

_STEP_NAME = re.compile(r"^ProfilerStep#(\d{1,18})$")  # past 18 digits: not a step number int64 holds


def _step_number_of_symbols(symbols: list[str]) -> np.ndarray:
    """Per symbol id: N for `ProfilerStep#N`, else -1."""
    out = np.full(len(symbols), MISSING, dtype=np.int64)
    for sid, name in enumerate(symbols):
        if name.startswith("ProfilerStep#"):
            m = _STEP_NAME.match(name)
            if m:
                out[sid] = int(m.group(1))
    return out


def _windows_by_step(step: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    steps, inverse = np.unique(step, return_inverse=True)
    lo = np.full(len(steps), np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(len(steps), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, inverse, start)
    np.maximum.at(hi, inverse, end)
    return steps, lo, hi


def step_windows(gpu: GpuActivities, ranges: Ranges, symbols: list[str]) -> StepWindows:
    """Per step N: the GPU `ProfilerStep#N` span, else the span of the GPU work launched inside
    the CPU `ProfilerStep#N`, else one window (step 0) over all GPU activity."""
    step_of_symbol = _step_number_of_symbols(symbols)
    step_of_range = step_of_symbol[ranges.name_id] if len(ranges) else np.zeros(0, np.int64)

    on_gpu = ranges.on_gpu & (step_of_range != MISSING)
    if on_gpu.any():
        steps, lo, hi = _windows_by_step(step_of_range[on_gpu], ranges.start_ns[on_gpu], ranges.end_ns[on_gpu])
        return StepWindows(steps, lo, hi, "gpu_annotation")

    on_cpu = ~ranges.on_gpu & (step_of_range != MISSING)
    if on_cpu.any() and len(gpu):
        launch = gpu.launch_start_ns
        idx = containing(ranges.start_ns[on_cpu], ranges.end_ns[on_cpu], launch, closed=True)
        inside = (launch != MISSING) & (idx >= 0)
        if inside.any():
            steps, lo, hi = _windows_by_step(step_of_range[on_cpu][idx[inside]], gpu.start_ns[inside],
                                             gpu.end_ns[inside])
            return StepWindows(steps, lo, hi, "cpu_annotation")

    if len(gpu):
        return StepWindows(
            np.zeros(1, np.int64),
            np.array([gpu.start_ns.min()], np.int64),
            np.array([gpu.end_ns.max()], np.int64),
            "whole_trace",
        )
    return StepWindows(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), "whole_trace")
