"""Clock offsets between ranks, from the end times of the smallest collectives (metrics.md §6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics.collectives import NS_PER_US, CollectiveMatch, RunActivities, collective_kind

ALIGN_MODES = ("auto", "none", "all")
# metrics.md §6: collectives whose ranks all finish together (each rank's result needs every rank's
# data); send/recv and all-to-all ranks finish when their own transfers do.
ENDS_TOGETHER = ("all_gather", "reduce_scatter", "all_reduce")
MIN_SAMPLES = 5  # every instance as small as the 5th smallest


@dataclass(frozen=True, slots=True)
class ClockOffsets:
    """Per rank position: o_r in ns, to subtract from that rank's times (0 for the reference clock),
    and the residual: the median |e_r - e_ref - o_r| over the collectives used (-1: not estimated)."""

    offsets_ns: np.ndarray
    warnings: tuple[str, ...] = ()
    residual_ns: np.ndarray | None = None

    def as_us(self, rank_ids: tuple[int, ...]) -> dict[int, float]:
        return {int(r): float(o) / NS_PER_US for r, o in zip(rank_ids, self.offsets_ns.tolist())}

    def residual_us(self, rank_ids: tuple[int, ...]) -> dict[int, float | None]:
        res = self.residual_ns if self.residual_ns is not None else np.full(len(rank_ids), -1)
        return {int(r): (float(x) / NS_PER_US if x >= 0 else None) for r, x in zip(rank_ids, res.tolist())}


def host_groups(hostnames: tuple[str | None, ...], align: str = "auto") -> np.ndarray:
    """Per rank position: an id shared by the ranks that share a clock.

    `auto`: by host name; ranks whose trace names no host share the clock of the others (one
    machine is the common case and nothing in the trace says otherwise). `none`: one clock for all.
    `all`: every rank its own clock (align even on one host).
    """
    if align not in ALIGN_MODES:
        raise ValueError(f"align must be one of {ALIGN_MODES}, not {align!r}")
    n = len(hostnames)
    if align == "none":
        return np.zeros(n, np.int64)
    if align == "all":
        return np.arange(n, dtype=np.int64)
    known = sorted({h for h in hostnames if h})
    first = hostnames[0] if hostnames and hostnames[0] else (known[0] if known else None)
    ids = {h: i for i, h in enumerate(known)}
    return np.array([ids[h] if h else ids.get(first, 0) for h in hostnames], np.int64)


def smallest_collectives(acts: RunActivities, match: CollectiveMatch) -> np.ndarray:
    """Bool per instance: the all-gathers, reduce-scatters and all-reduces no larger than the
    MIN_SAMPLES-th smallest of them (by bytes; by the longest member kernel where bytes are unknown):
    small ones finish on every rank within a µs (metrics.md §6)."""
    kinds = {c: collective_kind(c) for c in set(match.collective)}
    eligible = np.array([kinds[c] in ENDS_TOGETHER for c in match.collective], bool)
    if not eligible.any():
        return eligible
    size = match.bytes.astype(np.int64)
    if (size[eligible] < 0).any():  # unknown sizes: the shortest kernels instead
        mem = np.flatnonzero(match.instance >= 0)
        size = np.zeros(match.n_instances, np.int64)
        np.maximum.at(size, match.instance[mem], (acts.end_ns - acts.start_ns)[mem])
    d = np.sort(size[eligible])
    cut = d[min(len(d), MIN_SAMPLES) - 1]
    return eligible & (size <= cut)


def _estimate(acts: RunActivities, match: CollectiveMatch, use: np.ndarray, ranks: np.ndarray,
              ref_pos: int = 0) -> tuple[int, int] | None:
    """(median of e_r - e_ref, median |residual|) over the `use` instances that rank positions
    `ranks` share with the reference; None when they share none."""
    inst = match.instance
    mem = np.flatnonzero(inst >= 0)
    mem = mem[use[inst[mem]]]
    ref_end = np.zeros(match.n_instances, np.int64)  # int64: float64 would round ~1.8e18 ns to 256 ns
    has_ref = np.zeros(match.n_instances, bool)
    on_ref = mem[acts.rank_pos[mem] == ref_pos]
    ref_end[inst[on_ref]] = acts.end_ns[on_ref]
    has_ref[inst[on_ref]] = True
    rows = mem[np.isin(acts.rank_pos[mem], ranks)]
    rows = rows[has_ref[inst[rows]]]
    if len(rows) == 0:
        return None
    diffs = acts.end_ns[rows] - ref_end[inst[rows]]
    offset = int(np.rint(np.median(diffs)))
    return offset, int(np.rint(np.median(np.abs(diffs - offset))))


def step_length_ns(acts: RunActivities) -> int:
    """The longest (rank, step) extent of GPU activity: how far apart one job's ranks can start a step."""
    m = acts.step >= 0
    if not m.any():
        return int(acts.end_ns.max() - acts.start_ns.min()) if len(acts) else 0
    keys = np.stack([acts.rank_pos[m], acts.step[m]], axis=1)
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    lo = np.full(inverse.max() + 1, np.iinfo(np.int64).max, np.int64)
    hi = np.full(inverse.max() + 1, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(lo, inverse, acts.start_ns[m])
    np.maximum.at(hi, inverse, acts.end_ns[m])
    return int((hi - lo).max())


def clock_offsets(acts: RunActivities, match: CollectiveMatch, align: str = "auto") -> ClockOffsets:
    """metrics.md §6: o = median over the smallest collectives shared with the reference rank of
    (e_r - e_ref), per clock; the lowest rank (position 0) is the reference. In `auto`, a rank of the
    reference's host whose clock is more than a step off gets its own offset, with a warning."""
    n_ranks = len(acts.rank_ids)
    groups = host_groups(acts.hostnames, align)
    offsets = np.zeros(n_ranks, np.int64)
    residual = np.full(n_ranks, -1, np.int64)
    if n_ranks < 2:
        return ClockOffsets(offsets, (), residual)
    use = smallest_collectives(acts, match)
    warnings: list[str] = []
    if align == "auto":
        groups = _split_off_skewed(acts, match, use, groups, warnings)
    for g in np.unique(groups).tolist():
        members = np.flatnonzero(groups == g)
        if g == groups[0]:
            continue
        est = _estimate(acts, match, use, members)
        if est is None:
            names = [acts.rank_ids[p] for p in members.tolist()]
            warnings.append(f"ranks {names} share no matched all-gather, reduce-scatter or all-reduce with rank "
                            f"{acts.rank_ids[0]}: their clocks are not aligned (metrics.md §6)")
            continue
        offsets[members], residual[members] = est
    return ClockOffsets(offsets, tuple(warnings), residual)


def _split_off_skewed(acts: RunActivities, match: CollectiveMatch, use: np.ndarray, groups: np.ndarray,
                      warnings: list[str]) -> np.ndarray:
    """Ranks that share the reference's clock by host but whose collectives end more than a step
    away from the reference's get a clock of their own (metrics.md §6), with a warning."""
    step = step_length_ns(acts)
    out = groups.copy()
    skewed = []
    for p in np.flatnonzero(groups == groups[0]).tolist()[1:]:  # one per rank
        est = _estimate(acts, match, use, np.array([p]))
        if est is not None and abs(est[0]) > step:
            out[p] = groups.max() + 1 + p
            skewed.append(f"rank {acts.rank_ids[p]} by {est[0] / 1e3:,.0f} µs")
    if skewed:
        warnings.append(f"clocks disagree by more than a step ({step / 1e3:,.0f} µs) on one host: "
                        f"{', '.join(skewed)} against rank {acts.rank_ids[0]}; aligned on the smallest "
                        "collectives (metrics.md §6)")
    return out
