"""How much of a fused run's possible saving it attained against its unfused baseline: Flux's
overlap efficiency and the attained saving (docs/metrics.md §9). The same formulas serve the
analyzer (times from traces, µs) and `tpscope bench` (timed ops, ms): any unit, the same in all
arguments.
"""

from __future__ import annotations


def flux_overlap_efficiency(t_fused: float, t_unfused: float, t_compute: float) -> float | None:
    """Flux's E = 1 - (T_fused - T_compute) / (T_unfused - T_compute): 0 no better than the
    unfused run, 1 the communication fully hidden; None when T_unfused <= T_compute (metrics.md §9)."""
    den = t_unfused - t_compute
    return 1.0 - (t_fused - t_compute) / den if den > 0 else None


def attained_saving(
    t_fused: float, t_unfused: float, t_compute: float, t_comm: float
) -> float | None:
    """(T_unfused - T_fused) / (T_unfused - max(T_compute, T_comm)): the share of the saving the
    physical limit allows; None when that limit allows none (metrics.md §9)."""
    den = t_unfused - max(t_compute, t_comm)
    return (t_unfused - t_fused) / den if den > 0 else None
