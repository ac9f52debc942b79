"""Contention between compute and communication: how much slower each runs beside the other (metrics.md §8)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.metrics.collectives import (
    NS_PER_US,
    CollectiveMatch,
    CollectiveTiming,
    RunActivities,
    busbw_factor,
    collective_kind,
)
from tpscope.trace import ActivityClass

MIN_INSTANCES = 3  # §8: isolated and overlapped instances a signature needs for a slowdown
OVERLAPPED_FRACTION = 0.5  # §8: f >= this is "overlapped"; f == 0 is "isolated"


@dataclass(frozen=True, slots=True)
class KernelContention:
    """One compute-kernel signature: isolated versus overlapped durations (metrics.md §8)."""

    signature: str
    n_isolated: int
    n_overlapped: int
    isolated_median_us: float | None  # the baseline: own, else the reference run's
    overlapped_median_us: float | None
    slowdown: float | None
    baseline: str | None  # "own", "reference" or None


@dataclass(frozen=True, slots=True)
class CommContention:
    """One collective shape: transfer time and bus bandwidth isolated versus beside compute (§8)."""

    collective: str
    bytes: int | None
    n_isolated: int
    n_overlapped: int
    isolated_transfer_us: float | None
    overlapped_transfer_us: float | None
    isolated_busbw_gbps: float | None
    overlapped_busbw_gbps: float | None
    slowdown: float | None


@dataclass(frozen=True, slots=True)
class Contention:
    """Everything §8 computes for a run."""

    kernels: list[KernelContention]
    collectives: list[CommContention]
    by_step: dict[tuple[int, int], tuple[float, float]]  # (rank, step) -> (tax_us, baseline_us)
    coverage: float | None = None
    """Share of the overlapped compute time whose kernels have an isolated baseline: how much of
    the overlap the slowdown speaks for (None without overlapped compute)."""

    @property
    def slowdown(self) -> float | None:
        """Σ tax / Σ isolated medians over every rank and step (None without baselines)."""
        base = sum(b for _, b in self.by_step.values())
        return sum(t for t, _ in self.by_step.values()) / base if base > 0 else None


def group_medians(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys, counts, medians of values per key): one sort, no loop."""
    if len(keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order].astype(np.float64)
    uniq, first, counts = np.unique(k, return_index=True, return_counts=True)
    return uniq, counts, (v[first + (counts - 1) // 2] + v[first + counts // 2]) / 2


def comm_overlap_fraction(acts: RunActivities) -> np.ndarray:
    """Per row: f = |[s, e] ∩ U(comm on the rank's other lanes)| / dur for compute kernels, else NaN (§8)."""
    f = np.full(len(acts), np.nan)
    is_comm = acts.cls == ActivityClass.COMM
    for pos in range(len(acts.rank_ids)):
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        lane, s, e = acts.lane[lo:hi], acts.start_ns[lo:hi], acts.end_ns[lo:hi]
        comm, compute = is_comm[lo:hi], acts.cls[lo:hi] == ActivityClass.COMPUTE
        for k in np.unique(lane[compute]).tolist():  # a loop over lanes
            other = comm & (lane != k)
            cover = iv.union(s[other], e[other])
            mine = np.flatnonzero(compute & (lane == k))
            dur = e[mine] - s[mine]
            part = iv.overlap_with_set(s[mine], e[mine], cover)
            f[lo + mine] = np.where(dur > 0, part / np.maximum(dur, 1), 0.0)
    return f


def isolated_baselines(acts: RunActivities, f: np.ndarray | None = None) -> dict[str, tuple[float, int]]:
    """signature -> (median isolated duration in ns, count): the baselines a reference run supplies."""
    f = comm_overlap_fraction(acts) if f is None else f
    iso = np.flatnonzero((f == 0) & (acts.signature >= 0))
    keys, counts, med = group_medians(acts.signature[iso], acts.end_ns[iso] - acts.start_ns[iso])
    return {acts.strings[k]: (m, c) for k, c, m in zip(keys.tolist(), counts.tolist(), med.tolist())}


def kernel_contention(acts: RunActivities, reference: dict[str, tuple[float, int]] | None = None
                      ) -> tuple[list[KernelContention], dict[tuple[int, int], tuple[float, float]], float | None]:
    """Per-signature slowdown, per (rank, step) tax and baseline time, and the coverage of the
    overlapped compute time by baselines (metrics.md §8)."""
    f = comm_overlap_fraction(acts)
    dur = acts.end_ns - acts.start_ns
    sig = acts.signature
    known = (sig >= 0) & np.isfinite(f)
    iso = np.flatnonzero(known & (f == 0))
    ovl = np.flatnonzero(known & (f >= OVERLAPPED_FRACTION))
    n_sig = len(acts.strings)
    iso_n, iso_med = _per_key(sig[iso], dur[iso], n_sig)
    ovl_n, ovl_med = _per_key(sig[ovl], dur[ovl], n_sig)

    baseline = np.where(iso_n >= MIN_INSTANCES, iso_med, np.nan)
    source = np.where(iso_n >= MIN_INSTANCES, 1, 0)
    if reference:
        for k in np.flatnonzero((iso_n < MIN_INSTANCES) & (ovl_n > 0)).tolist():
            med, count = reference.get(acts.strings[k], (np.nan, 0))
            if count >= MIN_INSTANCES:
                baseline[k], source[k] = med, 2
    kernels = []
    for k in np.flatnonzero((iso_n > 0) | (ovl_n > 0)).tolist():  # one per signature
        has_base = bool(np.isfinite(baseline[k]) and baseline[k] > 0)
        slow = ovl_med[k] / baseline[k] - 1 if has_base and ovl_n[k] >= MIN_INSTANCES else None
        kernels.append(KernelContention(
            signature=acts.strings[k], n_isolated=int(iso_n[k]), n_overlapped=int(ovl_n[k]),
            isolated_median_us=float(baseline[k]) / NS_PER_US if has_base else None,
            overlapped_median_us=float(ovl_med[k]) / NS_PER_US if ovl_n[k] else None,
            slowdown=float(slow) if slow is not None else None,
            baseline=("own", "reference")[source[k] - 1] if has_base else None,
        ))
    kernels.sort(key=lambda c: -(c.slowdown if c.slowdown is not None else -np.inf))

    in_steps = ovl[acts.step[ovl] >= 0]
    taxed = in_steps[np.isfinite(baseline[sig[in_steps]]) & (baseline[sig[in_steps]] > 0)]
    overlapped_ns = float(dur[in_steps].sum())
    coverage = float(dur[taxed].sum()) / overlapped_ns if overlapped_ns > 0 else None
    base = baseline[sig[taxed]]
    by_step: dict[tuple[int, int], tuple[float, float]] = {}
    if len(taxed):
        keys = np.stack([acts.rank[taxed], acts.step[taxed]], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        tax = np.bincount(inverse, weights=dur[taxed] - base, minlength=len(uniq))
        total = np.bincount(inverse, weights=base, minlength=len(uniq))
        by_step = {(int(r), int(s)): (t / NS_PER_US, b / NS_PER_US)
                   for (r, s), t, b in zip(uniq.tolist(), tax.tolist(), total.tolist())}
    return kernels, by_step, coverage


def _per_key(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense (count, median) arrays of length n over integer keys."""
    count = np.zeros(n, np.int64)
    med = np.full(n, np.nan)
    uniq, c, m = group_medians(keys, values)
    count[uniq], med[uniq] = c, m
    return count, med


def comm_contention(acts: RunActivities, match: CollectiveMatch, timing: CollectiveTiming,
                    compute_sets: list[iv.IntervalSet]) -> list[CommContention]:
    """Per collective shape (name, bytes): the transfer part isolated from compute versus beside it."""
    rows = np.flatnonzero(match.instance >= 0)
    if len(rows) == 0:
        return []
    transfer = timing.transfer_ns[rows]
    end = acts.end_ns[rows]
    g = np.zeros(len(rows))
    for pos, cover in enumerate(compute_sets):  # a loop over ranks
        m = acts.rank_pos[rows] == pos
        part = iv.overlap_with_set(end[m] - transfer[m], end[m], cover)
        g[m] = np.where(transfer[m] > 0, part / np.maximum(transfer[m], 1), 0.0)
    inst = match.instance[rows]
    shape_keys = np.stack([acts.coll[rows], match.bytes[inst]], axis=1)
    shapes, shape = np.unique(shape_keys, axis=0, return_inverse=True)
    shape = shape.reshape(-1)
    iso_n, iso_med = _per_key(shape[g == 0], transfer[g == 0], len(shapes))
    ovl = g >= OVERLAPPED_FRACTION
    ovl_n, ovl_med = _per_key(shape[ovl], transfer[ovl], len(shapes))
    size = np.zeros(len(shapes), np.int64)
    size[shape] = match.group_size[inst]
    out = []
    for k, (coll, nbytes) in enumerate(shapes.tolist()):
        name = acts.strings[coll]
        factor = busbw_factor(collective_kind(name), int(size[k]))

        enough = iso_n[k] >= MIN_INSTANCES and ovl_n[k] >= MIN_INSTANCES
        out.append(CommContention(
            collective=name, bytes=int(nbytes) if nbytes >= 0 else None,
            n_isolated=int(iso_n[k]), n_overlapped=int(ovl_n[k]),
            isolated_transfer_us=float(iso_med[k]) / NS_PER_US if iso_n[k] else None,
            overlapped_transfer_us=float(ovl_med[k]) / NS_PER_US if ovl_n[k] else None,
            isolated_busbw_gbps=_busbw(nbytes, iso_med[k], factor),
            overlapped_busbw_gbps=_busbw(nbytes, ovl_med[k], factor),
            slowdown=float(ovl_med[k] / iso_med[k] - 1) if enough and iso_med[k] > 0 else None,
        ))
    return out


def _busbw(nbytes: int, transfer_ns: float, factor: float | None) -> float | None:
    """bytes / ns is GB/s; times nccl-tests' factor (metrics.md §5)."""
    if factor is None or nbytes < 0 or not np.isfinite(transfer_ns) or transfer_ns <= 0:
        return None
    return nbytes / transfer_ns * factor


def contention(acts: RunActivities, match: CollectiveMatch, timing: CollectiveTiming,
               compute_sets: list[iv.IntervalSet], reference: dict[str, tuple[float, int]] | None = None
               ) -> Contention:
    """metrics.md §8 for a run; `reference` supplies isolated baselines the run lacks."""
    kernels, by_step, coverage = kernel_contention(acts, reference)
    return Contention(kernels, comm_contention(acts, match, timing, compute_sets), by_step, coverage)
