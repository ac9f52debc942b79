"""Collective instances across ranks: matching, wait and transfer, skew, bytes, bandwidth (metrics.md §5).

Everything works on `RunActivities`, every rank's GPU activities in one columnar table, so that
matching and timing are a few sorts and grouped reductions, never a loop over events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.trace import ActivityClass, Run, is_sync

NS_PER_US = 1000.0
_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max

# metrics.md §5: which message size counts as the collective's bytes, and nccl-tests' bus-bandwidth
# factor for a group of n ranks (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md).
BUSBW_TABLE: dict[str, tuple[str, Callable[[int], float]]] = {
    "all_gather": ("out", lambda n: (n - 1) / n),
    "reduce_scatter": ("in", lambda n: (n - 1) / n),
    "all_reduce": ("in", lambda n: 2 * (n - 1) / n),
    "all_to_all": ("in", lambda n: (n - 1) / n),
    "broadcast": ("in", lambda n: 1.0),
    "reduce": ("in", lambda n: 1.0),
    "send_recv": ("in", lambda n: 1.0),
}
_KIND_PATTERNS = (  # first match wins, on the lower-case name without '_'
    ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
)
DTYPE_BYTES: dict[str, int] = {
    "bfloat16": 2, "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8,
    "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "byte": 1, "uint8": 1,
    "char": 1, "int8": 1, "bool": 1, "complexfloat": 8, "complexdouble": 16,
}


def collective_kind(name: str) -> str | None:
    """`_allgather_base`, `all_gather_into_tensor`, `allgather` ... -> `all_gather` (None if unknown)."""
    bare = name.lower().replace("_", "")
    for pattern, kind in _KIND_PATTERNS:
        if pattern in bare:
            return kind
    return None


def dtype_bytes(dtype: str) -> int | None:
    """Bytes per element of a trace's dtype name (`BFloat16`, `Float`, `Float8_e4m3fn` ...)."""
    lower = dtype.lower()
    if lower.startswith("float8"):
        return 1
    return DTYPE_BYTES.get(lower)


def busbw_factor(kind: str | None, n: int) -> float | None:
    if kind is None or n < 1 or kind not in BUSBW_TABLE:
        return None
    return BUSBW_TABLE[kind][1](n)


@dataclass(frozen=True, slots=True)
class RunActivities:
    """Every rank's GPU activities in one table; rows of one rank are contiguous and by start.

    Times are each rank's own clock (metrics.md §6 offsets are applied by the consumers). String
    columns (`coll`, `pg`, `dtype`, `signature`) are run-wide ids into `strings`.
    """

    rank: np.ndarray  # int64 rank number
    rank_pos: np.ndarray  # int64 index into Run.ranks
    row: np.ndarray  # int64 row in the rank's GpuActivities
    start_ns: np.ndarray
    end_ns: np.ndarray
    launch_start_ns: np.ndarray  # -1 when the launch call is not in the trace
    launch_end_ns: np.ndarray
    correlation: np.ndarray
    cls: np.ndarray
    sync: np.ndarray  # bool: a rank-synchronization kernel (classify.SYNC_SUBSTRINGS), all wait
    lane: np.ndarray  # run-wide lane id, index into lane_labels
    step: np.ndarray  # step number whose window (of this rank) holds the start; -1 if none
    coll: np.ndarray
    pg: np.ndarray
    dtype: np.ndarray
    seq: np.ndarray
    in_nelems: np.ndarray
    out_nelems: np.ndarray
    group_size: np.ndarray
    signature: np.ndarray
    strings: tuple[str, ...]
    lane_labels: tuple[str, ...]
    rank_ids: tuple[int, ...]
    hostnames: tuple[str | None, ...]
    rank_bounds: np.ndarray  # rows of rank_pos p are rank_bounds[p]:rank_bounds[p + 1]

    def __len__(self) -> int:
        return len(self.start_ns)


def _global_ids(local: np.ndarray, symbols: tuple[str, ...], table: dict[str, int]) -> np.ndarray:
    """Per-rank symbol ids -> run-wide ids: one dict lookup per distinct id, not per event."""
    out = np.full(len(local), -1, np.int64)
    has = local >= 0
    if has.any():
        uniq, inverse = np.unique(local[has], return_inverse=True)
        ids = np.array([table.setdefault(symbols[u], len(table)) for u in uniq.tolist()], np.int64)
        out[has] = ids[inverse]
    return out


def run_activities(run: Run) -> RunActivities:
    """Concatenate the ranks' GPU tables with run-wide lane and string ids."""
    table: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {}
    lane_labels: list[str] = []
    bounds = [0]
    for pos, r in enumerate(run.ranks):
        g = r.gpu
        n = len(g)
        cols = {
            "rank": np.full(n, r.rank, np.int64),
            "rank_pos": np.full(n, pos, np.int64),
            "row": np.arange(n, dtype=np.int64),
            "start_ns": g.start_ns,
            "end_ns": g.end_ns,
            "launch_start_ns": g.launch_start_ns,
            "launch_end_ns": g.launch_end_ns,
            "correlation": g.correlation,
            "cls": g.cls,
            "sync": is_sync(g.name_id, r.symbols) & (g.cls == ActivityClass.COMM),
            "lane": g.lane.astype(np.int64) + len(lane_labels),
            "step": g.step,
            "seq": g.seq,
            "in_nelems": g.in_nelems,
            "out_nelems": g.out_nelems,
            "group_size": g.group_size,
        }
        for name, local in (("coll", g.coll_name_id), ("pg", g.pg_name_id), ("dtype", g.dtype_id),
                            ("signature", g.signature_id)):
            cols[name] = _global_ids(local, r.symbols, table)
        for k, v in cols.items():
            parts.setdefault(k, []).append(v)
        lane_labels.extend(r.lane_label(i) for i in range(len(r.lanes)))
        bounds.append(bounds[-1] + n)
    if not run.ranks:
        raise ValueError("a run without ranks")
    strings = [""] * len(table)
    for s, i in table.items():
        strings[i] = s
    return RunActivities(
        **{k: np.concatenate(v) for k, v in parts.items()},
        strings=tuple(strings),
        lane_labels=tuple(lane_labels),
        rank_ids=tuple(r.rank for r in run.ranks),
        hostnames=tuple(r.hostname for r in run.ranks),
        rank_bounds=np.array(bounds, np.int64),
    )


@dataclass(frozen=True, slots=True)
class CollectiveMatch:
    """Which activity belongs to which collective instance (metrics.md §5)."""

    instance: np.ndarray  # per RunActivities row: instance id, -1 when unmatched
    step: np.ndarray  # per instance
    key: tuple[str, ...]  # per instance
    collective: tuple[str, ...]  # per instance: the trace's name (`_allgather_base`)
    bytes: np.ndarray  # per instance, -1 when the dtype or kind is unknown
    group_size: np.ndarray  # per instance: the Group size, else the number of matched ranks
    by_seq: bool
    warnings: tuple[str, ...]

    @property
    def n_instances(self) -> int:
        return len(self.step)


def _group_starts(*cols: np.ndarray) -> np.ndarray:
    """Boolean mask: row i starts a new group of equal `cols` (rows already sorted by them)."""
    n = len(cols[0])
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = np.any(np.stack([c[1:] != c[:-1] for c in cols]), axis=0)
    return new


def _ordinals(*cols: np.ndarray, by: np.ndarray) -> np.ndarray:
    """k-th occurrence (0-based, in `by` order) of each row within its group of equal `cols`."""
    order = np.lexsort((by, *reversed(cols)))
    new = _group_starts(*(c[order] for c in cols))
    first = np.maximum.accumulate(np.where(new, np.arange(len(order)), 0))
    k = np.empty(len(order), np.int64)
    k[order] = np.arange(len(order)) - first
    return k


def _instance_bytes(acts: RunActivities, rows: np.ndarray) -> np.ndarray:
    out = np.full(len(rows), -1, np.int64)
    kinds: dict[int, str | None] = {}
    for i, r in enumerate(rows.tolist()):  # one per instance
        c = int(acts.coll[r])
        kind = kinds[c] if c in kinds else kinds.setdefault(c, collective_kind(acts.strings[c]))
        size = dtype_bytes(acts.strings[acts.dtype[r]]) if acts.dtype[r] >= 0 else None
        if kind is None or size is None:
            continue
        nelems = acts.out_nelems[r] if BUSBW_TABLE[kind][0] == "out" else acts.in_nelems[r]
        if nelems >= 0:
            out[i] = int(nelems) * size
    return out


def match_collectives(acts: RunActivities) -> CollectiveMatch:
    """Instances keyed by (pg, Seq) when every kernel carries Seq, else (step, pg, name, ordinal)."""
    instance = np.full(len(acts), -1, np.int64)
    idx = np.flatnonzero((acts.cls == ActivityClass.COMM) & (acts.coll >= 0) & (acts.step >= 0))
    empty = CollectiveMatch(instance, np.zeros(0, np.int64), (), (), np.zeros(0, np.int64),
                            np.zeros(0, np.int64), False, ())
    if len(idx) == 0:
        return empty
    pos, step, pg, coll = acts.rank_pos[idx], acts.step[idx], acts.pg[idx], acts.coll[idx]
    by_seq = bool((acts.seq[idx] >= 0).all())
    if by_seq:
        keys = np.stack([pg, acts.seq[idx]], axis=1)
    else:
        k = _ordinals(pos, step, pg, coll, by=acts.start_ns[idx])
        keys = np.stack([step, pg, coll, k], axis=1)
    uniq, inst = np.unique(keys, axis=0, return_inverse=True)
    inst = inst.reshape(-1)
    n = len(uniq)

    bad_field = np.full(n, -1, np.int64)  # index into _CHECKED of the first field that differs
    for f, name in enumerate(_CHECKED):
        col = getattr(acts, name)[idx]
        lo = np.full(n, _I64_MAX, np.int64)
        hi = np.full(n, _I64_MIN, np.int64)
        np.minimum.at(lo, inst, col)
        np.maximum.at(hi, inst, col)
        bad_field = np.where((bad_field < 0) & (lo != hi), f, bad_field)
    members = np.bincount(inst, minlength=n)
    distinct = np.bincount(np.unique(np.stack([inst, pos], axis=1), axis=0)[:, 0], minlength=n)
    bad_field = np.where((bad_field < 0) & (distinct != members), len(_CHECKED), bad_field)
    lonely = (members < 2) & (bad_field < 0)
    good = (bad_field < 0) & ~lonely

    first_row = np.full(n, _I64_MAX, np.int64)
    np.minimum.at(first_row, inst, idx)
    inst_step = np.full(n, _I64_MAX, np.int64)
    np.minimum.at(inst_step, inst, step)
    warnings = _match_warnings(acts, uniq, first_row, bad_field, lonely, members, by_seq)

    new_id = np.cumsum(good) - 1
    instance[idx] = np.where(good[inst], new_id[inst], -1)
    g_rows = first_row[good]
    g_keys = uniq[good]
    if by_seq:
        key = tuple(f"{acts.strings[p]}#{s}" for p, s in g_keys.tolist())
    else:
        key = tuple(f"{acts.strings[p]}/{acts.strings[c]}/{k}" for _, p, c, k in g_keys.tolist())
    size = acts.group_size[g_rows]
    return CollectiveMatch(
        instance=instance,
        step=inst_step[good],
        key=key,
        collective=tuple(acts.strings[c] for c in acts.coll[g_rows].tolist()),
        bytes=_instance_bytes(acts, g_rows),
        group_size=np.where(size >= 1, size, members[good]),
        by_seq=by_seq,
        warnings=warnings,
    )


_CHECKED = ("coll", "dtype", "in_nelems", "out_nelems")
_CHECKED_LABEL = ("Collective name", "dtype", "In msg nelems", "Out msg nelems", "one kernel per rank")


def _match_warnings(acts: RunActivities, uniq: np.ndarray, first_row: np.ndarray, bad_field: np.ndarray,
                    lonely: np.ndarray, members: np.ndarray, by_seq: bool) -> tuple[str, ...]:
    out: list[str] = []

    def describe(i: int) -> str:
        r = int(first_row[i])
        name = acts.strings[acts.coll[r]]
        where = f"seq {uniq[i][1]}" if by_seq else f"step {uniq[i][0]} {name} #{uniq[i][3]}"
        return f"{where} on process group {acts.strings[acts.pg[r]]!r}"

    bad = np.flatnonzero(bad_field >= 0)
    if len(bad):
        i = int(bad[0])
        out.append(f"{len(bad)} collective instance(s) do not match across ranks (first: {describe(i)}: "
                   f"ranks disagree on {_CHECKED_LABEL[bad_field[i]]}); their kernels are left unmatched "
                   "and counted as transfer (metrics.md §5)")
    alone = np.flatnonzero(lonely)
    if len(alone) and len(acts.rank_ids) > 1:
        i = int(alone[0])
        out.append(f"{len(alone)} collective kernel(s) have no counterpart on another rank (first: rank "
                   f"{acts.rank[first_row[i]]} {describe(i)}); counted as transfer (metrics.md §5)")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CollectiveTiming:
    """Wait and transfer of every activity, and per-instance timing, on aligned clocks (§5, §6)."""

    wait_ns: np.ndarray  # per activity (0 for non-comm and unmatched, but a sync kernel's whole time)
    transfer_ns: np.ndarray  # per activity (0 for non-comm)
    arrival_ns: np.ndarray  # per instance: the last member's start
    skew_ns: np.ndarray  # per instance
    transfer_span_ns: np.ndarray  # per instance: last end minus arrival
    binding: np.ndarray  # per instance: the activity row of the last to arrive


def aligned(acts: RunActivities, offsets_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of every activity on the reference clock: t - o_rank (metrics.md §6)."""
    shift = offsets_ns[acts.rank_pos]
    return acts.start_ns - shift, acts.end_ns - shift


def collective_timing(acts: RunActivities, match: CollectiveMatch, offsets_ns: np.ndarray) -> CollectiveTiming:
    """metrics.md §5: arrival = max s_r; wait_r = max(0, min(e_r, arrival) - s_r); transfer = dur - wait;
    an unmatched synchronization kernel is all wait."""
    s, e = aligned(acts, offsets_ns)
    n = match.n_instances
    inst = match.instance
    mem = np.flatnonzero(inst >= 0)
    mi = inst[mem]
    arrival = np.full(n, _I64_MIN, np.int64)
    first = np.full(n, _I64_MAX, np.int64)
    last_end = np.full(n, _I64_MIN, np.int64)
    np.maximum.at(arrival, mi, s[mem])
    np.minimum.at(first, mi, s[mem])
    np.maximum.at(last_end, mi, e[mem])
    wait = np.zeros(len(acts), np.int64)
    wait[acts.sync] = (e - s)[acts.sync]  # unmatched synchronization kernels: all wait
    wait[mem] = np.clip(np.minimum(e[mem], arrival[mi]) - s[mem], 0, None)
    transfer = np.where(acts.cls == ActivityClass.COMM, (e - s) - wait, 0)
    binding = np.full(n, -1, np.int64)
    if len(mem):
        order = np.lexsort((s[mem], mi))  # by instance, then start: the last of each is the binding one
        last = np.append(mi[order][1:] != mi[order][:-1], True)
        binding[mi[order][last]] = mem[order][last]
    return CollectiveTiming(wait, transfer, arrival, arrival - first, np.clip(last_end - arrival, 0, None), binding)


def wait_transfer_by_step(acts: RunActivities, timing: CollectiveTiming) -> dict[tuple[int, int], tuple[float, float]]:
    """(rank, step) -> (comm_wait_us, comm_transfer_us): sums over the comm activities starting in the step."""
    m = (acts.cls == ActivityClass.COMM) & (acts.step >= 0)
    if not m.any():
        return {}
    keys = np.stack([acts.rank[m], acts.step[m]], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    wait = np.bincount(inverse, weights=timing.wait_ns[m], minlength=len(uniq))
    transfer = np.bincount(inverse, weights=timing.transfer_ns[m], minlength=len(uniq))
    return {(int(r), int(st)): (w / NS_PER_US, t / NS_PER_US)
            for (r, st), w, t in zip(uniq.tolist(), wait.tolist(), transfer.tolist())}


@dataclass(frozen=True, slots=True)
class CollectiveInstance:
    """One matched collective across ranks, in µs (metrics.md §5)."""

    step: int
    key: str
    collective: str
    bytes: int | None
    ranks: list[int]
    skew_us: float
    wait_us: float  # the longest wait of any rank
    transfer_us: float  # last end minus last arrival
    exposed_us: float  # the most kernel time any rank spends without compute beside it
    algbw_gbps: float | None
    busbw_gbps: float | None


def exposed_ns(acts: RunActivities, compute_sets: list[iv.IntervalSet]) -> np.ndarray:
    """Per activity: its time not covered by compute on the same rank (own clock)."""
    out = acts.end_ns - acts.start_ns
    for pos, cover in enumerate(compute_sets):
        lo, hi = acts.rank_bounds[pos], acts.rank_bounds[pos + 1]
        out[lo:hi] = out[lo:hi] - iv.overlap_with_set(acts.start_ns[lo:hi], acts.end_ns[lo:hi], cover)
    return out


def collective_instances(acts: RunActivities, match: CollectiveMatch, timing: CollectiveTiming,
                         exposed: np.ndarray) -> list[CollectiveInstance]:
    """The JSON rows of `collectives` (DESIGN.md), in step and key order."""
    n = match.n_instances
    if n == 0:
        return []
    mem = np.flatnonzero(match.instance >= 0)
    mi = match.instance[mem]
    max_wait = np.zeros(n, np.int64)
    max_exposed = np.zeros(n, np.int64)
    np.maximum.at(max_wait, mi, timing.wait_ns[mem])
    np.maximum.at(max_exposed, mi, exposed[mem])
    order = np.lexsort((acts.rank[mem], mi))
    ranks_sorted = acts.rank[mem][order].tolist()
    splits = np.flatnonzero(np.diff(mi[order])) + 1
    ranks_of = np.split(np.array(ranks_sorted, np.int64), splits)
    kinds = {name: collective_kind(name) for name in set(match.collective)}
    out = []
    for i in range(n):
        nbytes = int(match.bytes[i]) if match.bytes[i] >= 0 else None
        span = int(timing.transfer_span_ns[i])
        algbw = nbytes / span if nbytes is not None and span > 0 else None  # bytes/ns = GB/s
        factor = busbw_factor(kinds[match.collective[i]], int(match.group_size[i]))
        out.append(CollectiveInstance(
            step=int(match.step[i]), key=match.key[i], collective=match.collective[i], bytes=nbytes,
            ranks=ranks_of[i].tolist(), skew_us=int(timing.skew_ns[i]) / NS_PER_US,
            wait_us=int(max_wait[i]) / NS_PER_US, transfer_us=span / NS_PER_US,
            exposed_us=int(max_exposed[i]) / NS_PER_US, algbw_gbps=algbw,
            busbw_gbps=algbw * factor if algbw is not None and factor is not None else None,
        ))
    out.sort(key=lambda c: (c.step, c.key))
    return out
