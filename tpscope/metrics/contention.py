"""Contention between compute and communication: how much slower each runs beside the other (metrics.md §8)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.metrics.activities import NS_PER_US, RunActivities, durations_ns
from tpscope.metrics.collectives import (
    CollectiveMatch,
    CollectiveTiming,
    busbw_factor,
    collective_kind,
)
from tpscope.metrics.gemm import (
    RULES,
    Gemms,
    Samples,
    baselines,
    isolated_samples,
    same_grid_ns,
)
from tpscope.trace import ActivityClass
from tpscope.trace.columns import unique_rows

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
class GemmContention:
    """One GEMM shape of a run: its baseline and how much slower it ran beside a transfer (§8)."""

    shape: str  # "M×K×N dtype" (batch× first when batched)
    m: int
    k: int
    n: int
    batch: int
    dtype: str
    rule: str  # RULES: which rule gave the baseline ("none" without one)
    # SOURCES entry where its isolated samples come from ("run+reference": interpolated
    source: str | None
    # between one shape of each)
    n_isolated: int  # isolated samples behind the baseline
    n_overlapped: int  # GEMMs of this shape beside a transfer (f > 0)
    baseline_us: float | None  # isolated, every SM
    # isolated at the overlapped GEMMs' grid (median over them), when known
    same_sm_us: float | None
    overlapped_median_us: float | None  # over f >= 0.5
    slowdown: float | None  # median(overlapped, f >= 0.5) / baseline - 1
    tax_us_per_step: float  # Σ (dur - baseline) over its GEMMs beside a transfer, per rank and step


@dataclass(frozen=True, slots=True)
class TaxPart:
    """The tax of one layer or kernel class, per rank and step (§8)."""

    name: str
    gemm_us: float  # overlapped GEMM time (f > 0) with a baseline
    baseline_us: float
    tax_us: float
    # the part fewer SMs explain (None where no GEMM of it has a same-SM baseline)
    sm_us: float | None
    interference_us: float | None


@dataclass(frozen=True, slots=True)
class GemmBudget:
    """The GEMM time of a run per rank and step, taken apart (metrics.md §8). All in µs per rank-step."""

    rank_steps: int
    gemm_us: float  # every GEMM in the steps
    uncovered_us: float  # GEMMs without a baseline
    predicted_us: float  # Σ baseline over GEMMs with one: their time if each ran alone on every SM
    tax_us: float  # Σ (dur - baseline) over GEMMs beside a transfer (f > 0) with a baseline
    sm_us: float  # of the tax: Σ (same-SM baseline - baseline) where the same-SM time is known
    interference_us: float  # of the tax: Σ (dur - same-SM baseline) where it is known
    unsplit_us: float  # of the tax: where no same-SM time is known
    residual_us: (
        float  # Σ (dur - baseline) over isolated GEMMs with a baseline: the unexplained rest
    )
    noise_band: float | None  # median relative half-width of the isolated samples' [p10, p90]
    overlapped_us: float  # GEMMs beside a transfer, with or without a baseline
    coverage: float | None  # share of overlapped_us with a baseline
    closes: bool | None  # |residual| <= noise band x predicted (None without a noise band)
    reference_gemm_us: float | None = None  # the reference run's GEMM time per rank-step, measured


@dataclass(frozen=True, slots=True)
class Contention:
    """Everything §8 computes for a run."""

    kernels: list[KernelContention]
    collectives: list[CommContention]
    by_step: dict[tuple[int, int], tuple[float, float]]  # (rank, step) -> (tax_us, baseline_us)
    coverage: float | None = None
    """Share of the overlapped GEMM time whose shape has an isolated baseline: how much of
    the overlap the slowdown speaks for (None without overlapped GEMMs)."""
    gemms: list[GemmContention] | None = None
    budget: GemmBudget | None = None
    by_layer: list[TaxPart] | None = None
    by_kernel: list[TaxPart] | None = None

    @property
    def slowdown(self) -> float | None:
        """Σ tax / Σ isolated medians over every rank and step (None without baselines)."""
        base = sum(b for _, b in self.by_step.values())
        return sum(t for t, _ in self.by_step.values()) / base if base > 0 else None


def group_medians(
    keys: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys, counts, medians of values per key): one sort, no loop."""
    if len(keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order].astype(np.float64)
    uniq, first, counts = np.unique(k, return_index=True, return_counts=True)
    return uniq, counts, (v[first + (counts - 1) // 2] + v[first + counts // 2]) / 2


def comm_overlap_fraction(acts: RunActivities, comm_rows: np.ndarray | None = None) -> np.ndarray:
    """Per row: f = |[s, e] ∩ U(comm on the rank's other lanes)| / dur for compute kernels, else NaN (§8).
    `comm_rows` (bool per row): only those comm activities count (default: every one)."""
    f = np.full(len(acts), np.nan)
    is_comm = acts.cls == ActivityClass.COMM if comm_rows is None else comm_rows
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


def isolated_baselines(
    acts: RunActivities, f: np.ndarray | None = None
) -> dict[str, tuple[float, int]]:
    """signature -> (median isolated duration in ns, count): the baselines a reference run supplies."""
    f = comm_overlap_fraction(acts) if f is None else f
    iso = np.flatnonzero((f == 0) & (acts.signature >= 0))
    keys, counts, med = group_medians(acts.signature[iso], acts.end_ns[iso] - acts.start_ns[iso])
    return {
        acts.strings[k]: (m, c) for k, c, m in zip(keys.tolist(), counts.tolist(), med.tolist())
    }


def kernel_contention(
    acts: RunActivities,
    reference: dict[str, tuple[float, int]] | None = None,
    f: np.ndarray | None = None,
) -> tuple[list[KernelContention], dict[tuple[int, int], tuple[float, float]], float | None]:
    """Per-signature slowdown, per (rank, step) tax and baseline time, and the coverage of the
    overlapped compute time by baselines (metrics.md §8)."""
    f = comm_overlap_fraction(acts) if f is None else f
    sig = acts.signature
    known = (sig >= 0) & np.isfinite(f)
    iso = np.flatnonzero(known & (f == 0))
    ovl = np.flatnonzero(known & (f >= OVERLAPPED_FRACTION))
    n_sig = len(acts.strings)
    iso_n, iso_med = _per_key(sig[iso], durations_ns(acts, iso), n_sig)
    ovl_n, ovl_med = _per_key(sig[ovl], durations_ns(acts, ovl), n_sig)

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
        kernels.append(
            KernelContention(
                signature=acts.strings[k],
                n_isolated=int(iso_n[k]),
                n_overlapped=int(ovl_n[k]),
                isolated_median_us=float(baseline[k]) / NS_PER_US if has_base else None,
                overlapped_median_us=float(ovl_med[k]) / NS_PER_US if ovl_n[k] else None,
                slowdown=float(slow) if slow is not None else None,
                baseline=("own", "reference")[source[k] - 1] if has_base else None,
            )
        )
    # the largest slowdown first; ties (and kernels without one) by signature, so that the order
    # does not hang on how the trace was read
    kernels.sort(key=lambda c: (-(c.slowdown if c.slowdown is not None else -np.inf), c.signature))

    in_steps = ovl[acts.step[ovl] >= 0]
    taxed = in_steps[np.isfinite(baseline[sig[in_steps]]) & (baseline[sig[in_steps]] > 0)]
    overlapped_ns = float(durations_ns(acts, in_steps).sum())
    coverage = float(durations_ns(acts, taxed).sum()) / overlapped_ns if overlapped_ns > 0 else None
    base = baseline[sig[taxed]]
    by_step: dict[tuple[int, int], tuple[float, float]] = {}
    if len(taxed):
        uniq, inverse = unique_rows(acts.rank[taxed], acts.step[taxed])
        tax = np.bincount(inverse, weights=durations_ns(acts, taxed) - base, minlength=len(uniq))
        total = np.bincount(inverse, weights=base, minlength=len(uniq))
        by_step = {
            (int(r), int(s)): (t / NS_PER_US, b / NS_PER_US)
            for (r, s), t, b in zip(uniq.tolist(), tax.tolist(), total.tolist())
        }
    return kernels, by_step, coverage


def _per_key(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense (count, median) arrays of length n over integer keys."""
    count = np.zeros(n, np.int64)
    med = np.full(n, np.nan)
    uniq, c, m = group_medians(keys, values)
    count[uniq], med[uniq] = c, m
    return count, med


def gemm_contention(
    gemms: Gemms,
    acts: RunActivities,
    f: np.ndarray,
    pools: list[Samples],
    margin: int | None = None,
) -> Contention:
    """metrics.md §8 for the run's GEMMs: baselines by shape, the tax split into fewer SMs and
    interference, coverage, noise band, and the GEMM time budget per rank and step. `pools` are
    the isolated samples of (run, reference, calibration); pools[0] is filled here from the run."""
    dur = durations_ns(acts, gemms.act).astype(np.float64)
    fr = f[gemms.act]
    rank, step = acts.rank[gemms.act], acts.step[gemms.act]
    pools = [isolated_samples(gemms, dur, fr == 0), *pools[1:]]
    base = baselines(gemms.shapes, pools)
    full_by_shape = np.array([b.full_ns if b else np.nan for b in base] + [np.nan])
    full = full_by_shape[gemms.shape] if len(gemms) else np.zeros(0)
    pairs, pair = unique_rows(gemms.shape, gemms.grid)
    same_by_pair = np.array(
        [
            _or_nan(same_grid_ns(gemms.shapes[s], gemms.grids[g], base[s], pools, margin))
            for s, g in pairs.tolist()
        ]
        + [np.nan]
    )
    same = same_by_pair[pair.reshape(-1)] if len(gemms) else np.zeros(0)

    in_step = step >= 0
    has = np.isfinite(full)
    beside = in_step & (fr > 0)
    taxed = beside & has
    split = taxed & np.isfinite(same)
    tax = np.where(taxed, dur - full, 0.0)
    rank_steps = unique_rows(rank[in_step], step[in_step])[0]
    n = max(len(rank_steps), 1)
    weights = np.bincount(
        gemms.shape[in_step & has], weights=full[in_step & has], minlength=len(base)
    )
    noise = [
        (b.noise, w)
        for b, w in zip(base, weights.tolist())
        if b is not None and b.noise is not None and w > 0
    ]
    overlapped_ns = float(dur[beside].sum())
    band = (
        float(np.average([x for x, _ in noise], weights=[w for _, w in noise])) if noise else None
    )
    predicted_ns = float(full[in_step & has].sum())
    residual_ns = float((dur - full)[in_step & has & (fr == 0)].sum())
    budget = GemmBudget(
        rank_steps=len(rank_steps),
        gemm_us=_us(dur[in_step].sum(), n),
        uncovered_us=_us(dur[in_step & ~has].sum(), n),
        predicted_us=_us(predicted_ns, n),
        tax_us=_us(tax.sum(), n),
        sm_us=_us((same - full)[split].sum(), n),
        interference_us=_us((dur - same)[split].sum(), n),
        unsplit_us=_us(tax[taxed & ~split].sum(), n),
        residual_us=_us(residual_ns, n),
        noise_band=band,
        overlapped_us=_us(overlapped_ns, n),
        coverage=float(dur[taxed].sum()) / overlapped_ns if overlapped_ns > 0 else None,
        closes=abs(residual_ns) <= band * predicted_ns if band is not None else None,
    )
    by_step: dict[tuple[int, int], tuple[float, float]] = {}
    if taxed.any():
        keys, inverse = unique_rows(rank[taxed], step[taxed])
        inverse = inverse.reshape(-1)
        t = np.bincount(inverse, weights=tax[taxed], minlength=len(keys))
        b = np.bincount(inverse, weights=full[taxed], minlength=len(keys))
        by_step = {
            (int(r), int(s)): (tt / NS_PER_US, bb / NS_PER_US)
            for (r, s), tt, bb in zip(keys.tolist(), t.tolist(), b.tolist())
        }
    return Contention(
        kernels=[],
        collectives=[],
        by_step=by_step,
        coverage=budget.coverage,
        gemms=_shape_rows(gemms, base, dur, fr, beside, tax, same, n),
        budget=budget,
        by_layer=_parts(gemms.layer, gemms.layers, taxed, dur, full, tax, same, split, n),
        by_kernel=_parts(gemms.kernel, gemms.kernels, taxed, dur, full, tax, same, split, n),
    )


def _or_nan(x: float | None) -> float:
    return np.nan if x is None else x


def _us(ns: float, rank_steps: int) -> float:
    return float(ns) / NS_PER_US / rank_steps


def _shape_rows(
    gemms: Gemms,
    base: list,
    dur: np.ndarray,
    fr: np.ndarray,
    beside: np.ndarray,
    tax: np.ndarray,
    same: np.ndarray,
    n: int,
) -> list[GemmContention]:
    """One row per shape, the most taxed first."""
    ovl = fr >= OVERLAPPED_FRACTION
    ovl_n, ovl_med = _per_key(gemms.shape[ovl], dur[ovl], len(gemms.shapes))
    n_beside = np.bincount(gemms.shape[beside], minlength=len(gemms.shapes))
    tax_by = np.bincount(gemms.shape, weights=tax, minlength=len(gemms.shapes))
    known = beside & np.isfinite(same)
    _, same_med = _per_key(gemms.shape[known], same[known], len(gemms.shapes))
    rows = []
    for k, (s, b) in enumerate(zip(gemms.shapes, base)):  # a loop over shapes
        slow = ovl_med[k] / b.full_ns - 1 if b is not None and ovl_n[k] >= MIN_INSTANCES else None
        rows.append(
            GemmContention(
                shape=s.label,
                m=s.m,
                k=s.k,
                n=s.n,
                batch=s.batch,
                dtype=s.dtype,
                rule=RULES[b.rule] if b else RULES[0],
                source=b.source if b else None,
                n_isolated=b.n_samples if b else 0,
                n_overlapped=int(n_beside[k]),
                baseline_us=b.full_ns / NS_PER_US if b else None,
                same_sm_us=float(same_med[k]) / NS_PER_US if np.isfinite(same_med[k]) else None,
                overlapped_median_us=float(ovl_med[k]) / NS_PER_US if ovl_n[k] else None,
                slowdown=float(slow) if slow is not None else None,
                tax_us_per_step=float(tax_by[k]) / NS_PER_US / n,
            )
        )
    rows.sort(key=lambda r: -r.tax_us_per_step)
    return rows


def _parts(
    key: np.ndarray,
    names: tuple[str, ...],
    taxed: np.ndarray,
    dur: np.ndarray,
    full: np.ndarray,
    tax: np.ndarray,
    same: np.ndarray,
    split: np.ndarray,
    n: int,
) -> list[TaxPart]:
    """Tax per layer or kernel class (µs per rank-step), the most taxed first; GEMMs outside any
    layer are "(no layer)"."""
    k = np.where(key >= 0, key, len(names))[taxed]
    m = len(names) + 1

    def total(w, rows=None):
        rows = taxed if rows is None else rows
        return np.bincount(np.where(key >= 0, key, len(names))[rows], weights=w[rows], minlength=m)

    g, b, t = total(dur), total(full), total(tax)
    has_split = np.bincount(np.where(key >= 0, key, len(names))[split], minlength=m) > 0
    sm, inter = total(same - full, split), total(dur - same, split)

    def us(x: np.ndarray, i: int) -> float:
        return float(x[i]) / NS_PER_US / n

    out = [
        TaxPart(
            name=(names[i] if i < len(names) else "(no layer)"),
            gemm_us=us(g, i),
            baseline_us=us(b, i),
            tax_us=us(t, i),
            sm_us=us(sm, i) if has_split[i] else None,
            interference_us=us(inter, i) if has_split[i] else None,
        )
        for i in np.unique(k).tolist()
    ]
    return sorted(out, key=lambda p: -p.tax_us)


def comm_contention(
    acts: RunActivities,
    match: CollectiveMatch,
    timing: CollectiveTiming,
    compute_sets: list[iv.IntervalSet],
) -> list[CommContention]:
    """Per collective shape (name, bytes): the transfer part isolated from compute versus beside it."""
    rows = np.flatnonzero(match.instance >= 0)
    if len(rows) == 0:
        return []
    transfer = timing.transfer_ns[rows]
    end = acts.end_ns[rows]
    g = np.zeros(len(rows))
    cut = np.searchsorted(rows, acts.rank_bounds)  # rows are sorted: each rank's are a slice
    for pos, cover in enumerate(compute_sets):  # a loop over ranks
        m = slice(cut[pos], cut[pos + 1])
        part = iv.overlap_with_set(end[m] - transfer[m], end[m], cover)
        g[m] = np.where(transfer[m] > 0, part / np.maximum(transfer[m], 1), 0.0)
    inst = match.instance[rows]
    shapes, shape = unique_rows(acts.coll[rows], match.bytes[inst])
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
        out.append(
            CommContention(
                collective=name,
                bytes=int(nbytes) if nbytes >= 0 else None,
                n_isolated=int(iso_n[k]),
                n_overlapped=int(ovl_n[k]),
                isolated_transfer_us=float(iso_med[k]) / NS_PER_US if iso_n[k] else None,
                overlapped_transfer_us=float(ovl_med[k]) / NS_PER_US if ovl_n[k] else None,
                isolated_busbw_gbps=_busbw(nbytes, iso_med[k], factor),
                overlapped_busbw_gbps=_busbw(nbytes, ovl_med[k], factor),
                slowdown=float(ovl_med[k] / iso_med[k] - 1) if enough and iso_med[k] > 0 else None,
            )
        )
    return sorted(out, key=lambda c: (c.collective, c.bytes if c.bytes is not None else -1))


def _busbw(nbytes: int, transfer_ns: float, factor: float | None) -> float | None:
    """bytes / ns is GB/s; times nccl-tests' factor (metrics.md §5)."""
    if factor is None or nbytes < 0 or not np.isfinite(transfer_ns) or transfer_ns <= 0:
        return None
    return nbytes / transfer_ns * factor


def contention(
    gemms: Gemms,
    acts: RunActivities,
    match: CollectiveMatch,
    timing: CollectiveTiming,
    compute_sets: list[iv.IntervalSet],
    reference: dict[str, tuple[float, int]] | None = None,
    gemm_pools: list[Samples] | None = None,
    margin: int | None = None,
) -> Contention:
    """metrics.md §8 for a run. The headline figures (tax per step, coverage, slowdown) come from
    the GEMMs by shape (`gemms`, from a `GemmFinder`); `gemm_pools` are the
    isolated GEMM samples of the reference run and of a calibration. The per-signature table of
    every compute kernel stays beside them, with `reference` supplying the isolated baselines by
    signature."""
    f = comm_overlap_fraction(acts)
    kernels, _, _ = kernel_contention(acts, reference, f)
    pools = [{}, *(gemm_pools or [{}, {}])]
    g = gemm_contention(gemms, acts, f, pools, margin)
    return dataclasses.replace(
        g, kernels=kernels, collectives=comm_contention(acts, match, timing, compute_sets)
    )


def reference_gemm_samples(
    gemms: Gemms, acts: RunActivities, f: np.ndarray
) -> tuple[Samples, float | None]:
    """The isolated GEMM samples of a reference run (its GEMMs, its activities and their `f`), and
    its measured GEMM time per rank and step."""
    dur = durations_ns(acts, gemms.act)
    step = acts.step[gemms.act]
    in_step = step >= 0
    rank_steps = len(unique_rows(acts.rank[gemms.act][in_step], step[in_step])[0])
    per_step = float(dur[in_step].sum()) / NS_PER_US / rank_steps if rank_steps else None
    return isolated_samples(gemms, dur, f[gemms.act] == 0), per_step
