"""Clock offsets between ranks on different hosts, from collective end times (metrics.md §6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.metrics.collectives import NS_PER_US, CollectiveMatch, RunActivities

ALIGN_MODES = ("auto", "none", "all")


@dataclass(frozen=True, slots=True)
class ClockOffsets:
    """Per rank position: o_r in ns, to subtract from that rank's times (0 for the reference host)."""

    offsets_ns: np.ndarray
    warnings: tuple[str, ...] = ()

    def as_us(self, rank_ids: tuple[int, ...]) -> dict[int, float]:
        return {int(r): float(o) / NS_PER_US for r, o in zip(rank_ids, self.offsets_ns.tolist())}


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


def clock_offsets(acts: RunActivities, match: CollectiveMatch, align: str = "auto") -> ClockOffsets:
    """o_r = median over instances shared with the reference rank of (e_r - e_ref), per host (§6).

    The reference is the lowest rank (position 0). All ranks of one host get that host's median,
    since they share its clock.
    """
    n_ranks = len(acts.rank_ids)
    groups = host_groups(acts.hostnames, align)
    offsets = np.zeros(n_ranks, np.int64)
    ref_group = groups[0]
    if (groups == ref_group).all():
        return ClockOffsets(offsets)
    inst = match.instance
    mem = np.flatnonzero(inst >= 0)
    ref_end = np.zeros(match.n_instances, np.int64)  # int64: float64 would round ~1.8e18 ns to 256 ns
    has_ref = np.zeros(match.n_instances, bool)
    on_ref = mem[acts.rank_pos[mem] == 0]
    ref_end[inst[on_ref]] = acts.end_ns[on_ref]
    has_ref[inst[on_ref]] = True
    warnings: list[str] = []
    for g in np.unique(groups).tolist():
        if g == ref_group:
            continue
        rows = mem[groups[acts.rank_pos[mem]] == g]
        rows = rows[has_ref[inst[rows]]]
        diffs = acts.end_ns[rows] - ref_end[inst[rows]]
        members = np.flatnonzero(groups == g)
        if len(diffs) == 0:
            names = [acts.rank_ids[p] for p in members.tolist()]
            warnings.append(f"ranks {names} share no matched collective with rank {acts.rank_ids[0]}: "
                            "their clocks are not aligned (metrics.md §6)")
            continue
        offsets[members] = int(np.rint(np.median(diffs)))
    return ClockOffsets(offsets, tuple(warnings))
