"""Kernels of runs on different GPUs compared by family when their names differ (metrics.md §9)."""

from __future__ import annotations

from tpscope.metrics.kernel_stats import KernelTime
from tpscope.trace.classify import ActivityKind, kernel_family

SHARED_NAMES_MIN = (
    0.5  # below this share of the candidate's kernel time under names the baseline has
)


def names_differ(baseline: tuple[KernelTime, ...], candidate: tuple[KernelTime, ...]) -> bool:
    """Whether less than half of the candidate's kernel time runs under names the baseline has
    (another GPU vendor or library: every kernel would look new)."""
    names = {k.key for k in baseline}
    total = sum(k.us_per_step for k in candidate)
    shared = sum(k.us_per_step for k in candidate if k.key in names)
    return bool(baseline) and total > 0 and shared / total < SHARED_NAMES_MIN


def by_family(kernels: tuple[KernelTime, ...]) -> tuple[KernelTime, ...]:
    """One KernelTime per family (GEMM, attention, elementwise, communication ...): sums per step."""
    out: dict[str, dict] = {}
    for k in kernels:  # one per kernel name
        kind = ActivityKind.MEMCPY if k.activity_class == "memory" else ActivityKind.KERNEL
        family = kernel_family(k.key, kind)
        acc = out.setdefault(family, {"cls": k.activity_class, "us": 0.0, "n": 0.0, "steps": []})
        acc["us"] += k.us_per_step
        acc["n"] += k.count_per_step
        steps = acc["steps"]
        steps.extend([0.0] * (len(k.us_by_step) - len(steps)))
        for i, v in enumerate(k.us_by_step):
            steps[i] += v
    return tuple(
        sorted(
            (
                KernelTime(f"{family} (by family)", a["cls"], a["us"], a["n"], tuple(a["steps"]))
                for family, a in out.items()
            ),
            key=lambda k: -k.us_per_step,
        )
    )
