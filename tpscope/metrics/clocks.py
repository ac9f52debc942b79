"""Clock offsets between ranks, from the end times of the smallest collectives (metrics.md §6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics.activities import NS_PER_US, RunActivities, durations_ns
from tpscope.metrics.collectives import CollectiveMatch, collective_kind
from tpscope.numbers import number

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
        return {
            int(r): (float(x) / NS_PER_US if x >= 0 else None)
            for r, x in zip(rank_ids, res.tolist())
        }


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
        np.maximum.at(size, match.instance[mem], durations_ns(acts, mem))
    d = np.sort(size[eligible])
    cut = d[min(len(d), MIN_SAMPLES) - 1]
    return eligible & (size <= cut)


def _against(
    acts: RunActivities, match: CollectiveMatch, use: np.ndarray, ref_pos: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rank position: (median of e_r - e_ref, median |e_r - e_ref - offset|, whether any) over the
    `use` instances each rank shares with rank position `ref_pos`. One pass over the members."""
    n = len(acts.rank_ids)
    inst = match.instance
    mem = np.flatnonzero(inst >= 0)
    mem = mem[use[inst[mem]]]
    # int64: float64 would round ~1.8e18 ns to 256 ns
    ref_end = np.zeros(match.n_instances, np.int64)
    has_ref = np.zeros(match.n_instances, bool)
    on_ref = mem[acts.rank_pos[mem] == ref_pos]
    ref_end[inst[on_ref]] = acts.end_ns[on_ref]
    has_ref[inst[on_ref]] = True
    rows = mem[has_ref[inst[mem]]]
    pos = acts.rank_pos[rows]
    diff = acts.end_ns[rows] - ref_end[inst[rows]]
    offset = _median_by(pos, diff, n)
    residual = _median_by(pos, np.abs(diff - offset[pos]), n)
    return offset, residual, np.bincount(pos, minlength=n) > 0


def _median_by(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per group 0..n-1: the median of its int64 values, rounded to an integer (0 where empty)."""
    out = np.zeros(n, np.int64)
    if len(values) == 0:
        return out
    order = np.lexsort((values, group))
    g, v = group[order], values[order]
    first = np.searchsorted(g, np.arange(n), side="left")
    count = np.searchsorted(g, np.arange(n), side="right") - first
    has = count > 0
    lo = v[first[has] + (count[has] - 1) // 2]
    hi = v[first[has] + count[has] // 2]
    out[has] = lo + (hi - lo) // 2  # int64 all the way: (lo + hi) / 2 in float64 would round
    return out


def rank_estimates(
    acts: RunActivities, match: CollectiveMatch
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rank position: its clock's offset from the reference's (ns), the residual, and whether it
    could be estimated. From the smallest collectives shared with the reference, else with any rank
    already estimated (a pipeline stage reached through another), else from every matched instance
    (send/recv and all-to-all end within a transfer of each other) (metrics.md §6)."""
    n = len(acts.rank_ids)
    offset = np.zeros(n, np.int64)
    residual = np.full(n, -1, np.int64)
    known = np.zeros(n, bool)
    known[0] = True
    small = smallest_collectives(acts, match)
    for use in (small, np.ones(match.n_instances, bool)):
        frontier = list(np.flatnonzero(known).tolist())
        while frontier and not known.all():  # one pass per rank that reaches new ones
            q = frontier.pop(0)
            o, res, has = _against(acts, match, use, q)
            new = has & ~known
            offset[new] = o[new] + offset[q]
            residual[new] = res[new]
            known |= new
            frontier.extend(np.flatnonzero(new).tolist())
    residual[0] = -1
    return offset, residual, known


def _assign(
    acts: RunActivities, match: CollectiveMatch, groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Offsets per clock: the reference's clock is 0; another clock gets the median over its ranks of
    (e_r - e_q) + o_q against the first aligned rank q they share collectives with (the smallest
    collectives first, then any). Returns offsets, residuals and which ranks were aligned."""
    n = len(groups)
    offsets = np.zeros(n, np.int64)
    residual = np.full(n, -1, np.int64)
    done = groups == groups[0]
    for use in (smallest_collectives(acts, match), np.ones(match.n_instances, bool)):
        frontier = np.flatnonzero(done).tolist()
        while frontier and not done.all():  # one pass per aligned rank that reaches new clocks
            q = frontier.pop(0)
            o, res, has = _against(acts, match, use, q)
            for g in np.unique(groups[has & ~done]).tolist():  # one per clock reached
                members = np.flatnonzero(groups == g)
                have = members[has[members]]
                offsets[members] = (
                    _median_by(np.zeros(len(have), np.int64), o[have], 1)[0] + offsets[q]
                )
                residual[have] = res[have]
                done[members] = True
                frontier.extend(members.tolist())
    return offsets, residual, done


def step_length_ns(acts: RunActivities) -> int:
    """The longest (rank, step) extent of GPU activity: how far apart one job's ranks can start a step."""
    longest = None
    for pos in range(len(acts.rank_ids)):  # a loop over ranks, not events
        lo, hi = int(acts.rank_bounds[pos]), int(acts.rank_bounds[pos + 1])
        step = acts.step[lo:hi]
        m = step >= 0
        if not m.any():
            continue
        k = (step[m] - step[m].min()).astype(np.int64)  # the rank's steps as 0, 1, ...
        first = np.full(int(k.max()) + 1, np.iinfo(np.int64).max, np.int64)
        last = np.full(len(first), np.iinfo(np.int64).min, np.int64)
        np.minimum.at(first, k, acts.start_ns[lo:hi][m])
        np.maximum.at(last, k, acts.end_ns[lo:hi][m])
        present = last > np.iinfo(np.int64).min
        extent = int((last[present] - first[present]).max())
        longest = extent if longest is None else max(longest, extent)
    if longest is None:
        return int(acts.end_ns.max() - acts.start_ns.min()) if len(acts) else 0
    return longest


def clock_offsets(acts: RunActivities, match: CollectiveMatch, align: str = "auto") -> ClockOffsets:
    """metrics.md §6: per clock, the median of its ranks' offsets from the reference (rank position 0);
    in `auto`, a rank of the reference's host whose clock is more than a step off gets its own."""
    n_ranks = len(acts.rank_ids)
    groups = host_groups(acts.hostnames, align)
    if n_ranks < 2 or (align != "auto" and (groups == groups[0]).all()):
        return ClockOffsets(np.zeros(n_ranks, np.int64), (), np.full(n_ranks, -1, np.int64))
    warnings: list[str] = []
    if align == "auto":
        est, _, known = rank_estimates(acts, match)
        step = step_length_ns(acts)
        skewed = np.flatnonzero((groups == groups[0]) & known & (np.abs(est) > step))
        if len(skewed):
            groups = groups.copy()
            groups[skewed] = groups.max() + 1 + np.arange(len(skewed))
            listed = ", ".join(
                f"rank {acts.rank_ids[p]} by {number(est[p] / 1e3, 'count')} µs"
                for p in skewed.tolist()
            )
            warnings.append(
                f"clocks disagree by more than a step ({number(step / 1e3, 'count')} µs) on one host: {listed} "
                f"against rank {acts.rank_ids[0]}; aligned on collective end times (metrics.md §6)"
            )
    offsets, residual, done = _assign(acts, match, groups)
    for g in np.unique(groups[~done]).tolist():
        names = [acts.rank_ids[p] for p in np.flatnonzero(groups == g).tolist()]
        warnings.append(
            f"ranks {names} share no matched collective with rank {acts.rank_ids[0]}, directly or "
            "through other ranks: their clocks are not aligned (metrics.md §6)"
        )
    return ClockOffsets(offsets, tuple(warnings), residual)
