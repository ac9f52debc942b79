"""Step windows of one rank, and the step of each GPU activity (metrics.md §3)."""

from __future__ import annotations

import re

import numpy as np

from tpscope.trace.columns import MISSING, containing
from tpscope.trace.tables import Ranges, StepWindows

_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
_MAX_STEP = 2**62  # larger step numbers are not numbers a profiler writes


def _step_number_of_symbols(symbols: list[str]) -> np.ndarray:
    """Per symbol id: N for `ProfilerStep#N`, else -1."""
    out = np.full(len(symbols), MISSING, dtype=np.int64)
    for sid, name in enumerate(symbols):
        if name.startswith("ProfilerStep#"):
            m = _STEP_NAME.match(name)
            if m and int(m.group(1)) < _MAX_STEP:
                out[sid] = int(m.group(1))
    return out


def _windows_by_step(
    step: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, ...]:
    steps, inverse = np.unique(step, return_inverse=True)
    lo = np.full(len(steps), np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(len(steps), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, inverse, start)
    np.maximum.at(hi, inverse, end)
    return steps, lo, hi


def partition(steps: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Windows that partition the timeline (metrics.md §3): for `steps` sorted, step N's window runs
    from the end of step N-1's window to the end of step N's last activity (`hi`); a step whose
    predecessor was not profiled (the first, or the first of a later profiling cycle) from its own
    first activity (`lo`). Ends are a running maximum, so windows never overlap: a step whose last
    activity ended before its predecessor's has an empty window."""
    end = np.maximum.accumulate(hi) if len(hi) else hi
    start = lo.copy()
    if len(steps) > 1:
        follows = steps[1:] == steps[:-1] + 1
        start[1:] = np.where(follows, end[:-1], np.maximum(lo[1:], end[:-1]))
    return start, np.maximum(end, start)


def launch_steps(launch_start_ns: np.ndarray, ranges: Ranges, symbols: list[str]) -> np.ndarray:
    """Per GPU activity: N when its launch call lies inside the CPU `ProfilerStep#N` range (rule 1
    of metrics.md §3), else -1. Nested `record_function` ranges inside the step do not matter."""
    step_of_range = (
        _step_number_of_symbols(symbols)[ranges.name_id] if len(ranges) else np.zeros(0, np.int64)
    )
    on_cpu = ~ranges.on_gpu & (step_of_range != MISSING)
    out = np.full(len(launch_start_ns), MISSING, np.int64)
    if not on_cpu.any() or len(launch_start_ns) == 0:
        return out
    idx = containing(ranges.start_ns[on_cpu], ranges.end_ns[on_cpu], launch_start_ns, closed=True)
    inside = (launch_start_ns != MISSING) & (idx >= 0)
    out[inside] = step_of_range[on_cpu][idx[inside]]
    return out


def step_windows(
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    launch_step: np.ndarray,
    ranges: Ranges,
    symbols: list[str],
    cpu_run: bool = False,
) -> tuple[StepWindows, np.ndarray]:
    """The step windows of a rank and the step of each of its GPU activities (metrics.md §3).

    1. `cpu_launch`: step N holds the GPU activities launched inside the CPU `ProfilerStep#N`;
    2. `gpu_annotation`: else the GPU-side `ProfilerStep#N` spans, an activity in the one holding
       its start;
    3. `whole_trace`: else one window, step 0, over all GPU activity.

    The windows of rules 1 and 2 partition the timeline (`partition`), ending where the step's
    last activity (rule 2: its annotation) ends; on a CPU run (`cpu_run`, metrics.md §1) where
    the CPU `ProfilerStep#N` range ends.
    """
    step_of_range = (
        _step_number_of_symbols(symbols)[ranges.name_id] if len(ranges) else np.zeros(0, np.int64)
    )
    if (launch_step != MISSING).any():
        has = launch_step != MISSING
        steps, lo, hi = _windows_by_step(launch_step[has], start_ns[has], end_ns[has])
        on_cpu = ~ranges.on_gpu & (step_of_range != MISSING) if len(ranges) else None
        if cpu_run and on_cpu is not None and on_cpu.any():
            r_steps, r_lo, r_hi = _windows_by_step(
                step_of_range[on_cpu], ranges.start_ns[on_cpu], ranges.end_ns[on_cpu]
            )
            at = np.searchsorted(r_steps, steps)  # every launch step has its range
            lo, hi = r_lo[at], r_hi[at]
        return StepWindows(steps, *partition(steps, lo, hi), "cpu_launch"), launch_step

    on_gpu = ranges.on_gpu & (step_of_range != MISSING)
    if on_gpu.any():
        steps, lo, hi = _windows_by_step(
            step_of_range[on_gpu], ranges.start_ns[on_gpu], ranges.end_ns[on_gpu]
        )
        idx = containing(lo, hi, start_ns)
        return StepWindows(steps, *partition(steps, lo, hi), "gpu_annotation"), np.where(
            idx >= 0, steps[np.maximum(idx, 0)], MISSING
        )

    if len(start_ns):
        window = StepWindows(
            np.zeros(1, np.int64),
            np.array([start_ns.min()], np.int64),
            np.array([end_ns.max()], np.int64),
            "whole_trace",
        )
        return window, np.zeros(len(start_ns), np.int64)
    empty = np.zeros(0, np.int64)
    return StepWindows(empty, empty, empty, "whole_trace"), empty
