"""The run-wide activity table: every rank's GPU activities in one columnar table, the input of
every cross-rank metric (matching, clocks, critical path, contention).

Names, process groups and other strings become run-wide ids, so that the metrics are a few sorts
and grouped reductions over columns, never a loop over events. The table is filled one rank at a
time into columns sized from the ranks' headers, ids as int32: about 100 bytes per activity, the
largest thing the reduce of a many-rank run holds (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tpscope.metrics import cpu_groups
from tpscope.metrics import intervals as iv
from tpscope.trace import ActivityClass, RankTrace, Run, is_sync
from tpscope.trace.columns import unique_rows
from tpscope.trace.compact import RankHeader
from tpscope.trace.cpu_activities import is_blocking_wait

NS_PER_US = 1000.0


@dataclass(frozen=True, slots=True)
class RunActivities:
    """Every rank's GPU activities in one table; rows of one rank are contiguous and by start.

    Times are each rank's own clock (metrics.md §6 offsets are applied by the consumers). String
    columns (`coll`, `pg`, `dtype`, `signature`) are run-wide ids into `strings`.
    """

    rank: np.ndarray  # int32 rank number
    rank_pos: np.ndarray  # int32 index into Run.ranks; its rows are that rank's GpuActivities
    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    cls: np.ndarray
    sync: np.ndarray  # bool: a rank-synchronization kernel (classify.SYNC_SUBSTRINGS), all wait
    lane: np.ndarray  # int32 run-wide lane id, index into lane_labels
    step: np.ndarray  # int32 step number whose window (of this rank) holds the start; -1 if none
    # int32 run-wide string ids
    coll: np.ndarray
    pg: np.ndarray
    dtype: np.ndarray
    # int32, int64 where a value needs it
    seq: np.ndarray
    in_nelems: np.ndarray
    out_nelems: np.ndarray
    group_size: np.ndarray
    signature: np.ndarray
    name: np.ndarray  # the activity's name
    group: np.ndarray  # process group "name [ranks]" (metrics.md §5 "Process groups"), -1 if none
    pg_desc: np.ndarray
    p2p: np.ndarray  # "s1 r3": the global peers a point-to-point kernel sends to / receives from
    # comm kernels without metadata: the `c10d::` CPU op around their launch (-1: none)
    op: np.ndarray
    strings: tuple[str, ...]
    lane_labels: tuple[str, ...]
    rank_ids: tuple[int, ...]
    hostnames: tuple[str | None, ...]
    world_sizes: tuple[int | None, ...]
    rank_bounds: np.ndarray  # rows of rank_pos p are rank_bounds[p]:rank_bounds[p + 1]
    notes: tuple[str, ...] = ()  # warnings about the table (CPU runs without groups, §5)

    def __len__(self) -> int:
        return len(self.start_ns)


def _global_ids(local: np.ndarray, symbols: tuple[str, ...], table: dict[str, int]) -> np.ndarray:
    """Per-rank symbol ids -> run-wide ids: one dict lookup per distinct id, not per event."""
    out = np.full(len(local), -1, np.int64)
    has = local >= 0
    if has.any():
        present = local[has]
        used = np.flatnonzero(np.bincount(present))  # the distinct ids, ascending, in O(n)
        ids = np.empty(int(used[-1]) + 1, np.int64)
        ids[used] = [table.setdefault(symbols[u], len(table)) for u in used.tolist()]
        out[has] = ids[present]
    return out


def _groups(r) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per activity, an index naming its process group (-1 without one) into the returned
    symbols: the rank's, then one "name [ranks]" per distinct (pg name, ranks) of its described
    kernels, ranks as "0,1" (from pg_config where the kernel does not say, metrics.md §5) or ""."""
    g = r.gpu
    out = np.full(len(g), -1, np.int64)
    rows = np.flatnonzero((g.pg_name_id >= 0) | (g.pg_ranks_id >= 0))
    pairs, inverse = unique_rows(g.pg_name_id[rows], g.pg_ranks_id[rows])
    out[rows] = len(r.symbols) + inverse
    config = r.info.get("process_groups", {})
    labels = []
    for pg, ranks in pairs.tolist():
        name = r.symbols[pg] if pg >= 0 else ""
        text = r.symbols[ranks] if ranks >= 0 else ""
        if not text and name in config:
            text = ",".join(map(str, config[name][1]))
        labels.append(f"{name} [{text}]")
    return out, r.symbols + tuple(labels)


def _enclosing_c10d_op(r) -> np.ndarray:
    """Per activity, for comm kernels without collective metadata: the name id of the `c10d::` CPU
    op (`c10d::allreduce_`, `c10d::alltoall_base_`) whose time holds the launch, on the launch's
    thread; -1 elsewhere. Older traces name their collectives only there."""
    g, ops = r.gpu, r.cpu_ops
    out = np.full(len(g), -1, np.int64)
    want = np.flatnonzero(
        (g.cls == ActivityClass.COMM) & (g.coll_name_id < 0) & (g.launch_start_ns >= 0)
    )
    if len(want) == 0 or len(ops) == 0:
        return out
    is_c10d = np.array([s.startswith("c10d::") for s in r.symbols], bool)
    c10d = np.flatnonzero(is_c10d[np.maximum(ops.name_id, 0)] & (ops.name_id >= 0))
    for tid in np.unique(ops.tid[c10d]).tolist():  # one pass per CPU thread
        o = c10d[ops.tid[c10d] == tid]  # by start (CpuCalls rows are)
        k = want[g.launch_tid[want] == tid]
        at = np.searchsorted(ops.start_ns[o], g.launch_start_ns[k], side="right") - 1
        ok = (at >= 0) & (ops.end_ns[o[np.maximum(at, 0)]] >= g.launch_start_ns[k])
        out[k[ok]] = ops.name_id[o[at[ok]]]
    return out


def _descriptions(r) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per activity, its group's description: the kernel's `Process Group Description`, else the
    `pg_desc` that pg_config gives its group's name (ids into the returned symbols)."""
    g = r.gpu
    config = r.info.get("process_groups", {})
    descs = sorted({d for d, _ in config.values() if d and d != "undefined"})
    symbols = r.symbols + tuple(descs)
    out = g.pg_desc_id.astype(np.int64)
    blank = [i for i, t in enumerate(r.symbols) if t == ""]  # a missing arg is the "" symbol
    missing = ((out < 0) | np.isin(out, blank)) & (g.pg_name_id >= 0)
    if missing.any() and descs:
        of_name = {i: config.get(n, ("", ()))[0] for i, n in enumerate(r.symbols) if n in config}
        ids = _broadcast_ids(
            g.pg_name_id[missing],
            {i: len(r.symbols) + descs.index(d) if d in descs else -1 for i, d in of_name.items()},
        )
        out[missing] = ids
    return out, symbols


def _broadcast_ids(ids: np.ndarray, values: dict[int, int]) -> np.ndarray:
    uniq, inverse = np.unique(ids, return_inverse=True)
    return np.array([values.get(u, -1) for u in uniq.tolist()], np.int64)[inverse.reshape(-1)]


_INT32 = ("rank", "rank_pos", "lane", "step")
_INT64 = ("start_ns", "end_ns")
# int32 until a value needs more (a tensor of 2**31 elements): the column is then widened
_WIDENED = ("seq", "in_nelems", "out_nelems", "group_size")
_STRING_IDS = ("coll", "pg", "dtype", "signature", "name", "p2p", "pg_desc", "group", "op")


class ActivityTable:
    """The run-wide table filled one rank at a time (`add`), its columns sized from the ranks'
    headers so that no rank's columns are copied twice."""

    def __init__(self, headers: Sequence[RankHeader]) -> None:
        n = sum(h.gpu_rows for h in headers)
        self.headers = headers
        self.cols = {k: np.empty(n, np.int32) for k in (*_INT32, *_STRING_IDS, *_WIDENED)}
        self.cols.update({k: np.empty(n, np.int64) for k in _INT64})
        self.cols["cls"] = np.empty(n, np.int8)
        self.cols["sync"] = np.empty(n, bool)
        self.table: dict[str, int] = {}
        self.lane_labels: list[str] = []
        self.process_groups: list[dict] = [{} for _ in headers]
        self.cpu_run = [False] * len(headers)
        self.notes: list[str] = []
        self.bounds = np.concatenate([[0], np.cumsum([h.gpu_rows for h in headers])]).astype(
            np.int64
        )

    def add(self, pos: int, r: RankTrace) -> None:
        """The rows of `r`, the rank at `pos`."""
        g, table = r.gpu, self.table
        lo, hi = int(self.bounds[pos]), int(self.bounds[pos + 1])
        if hi - lo != len(g):
            raise ValueError(f"rank {r.rank}: {len(g)} activities, its header says {hi - lo}")
        c = {k: v[lo:hi] for k, v in self.cols.items()}
        c["rank"][:] = r.rank
        c["rank_pos"][:] = pos
        for k in ("start_ns", "end_ns", "cls", "step"):
            c[k][:] = getattr(g, k)
        for k in _WIDENED:
            values = getattr(g, k)
            if len(values) and c[k].dtype != np.int64 and _needs_int64(values):
                self.cols[k] = self.cols[k].astype(np.int64)
                c[k] = self.cols[k][lo:hi]
            c[k][:] = values
        # metrics.md §5: all wait: synchronization kernels, and a CPU run's blocking waits
        waits = is_sync(g.name_id, r.symbols) | (r.cpu_run & is_blocking_wait(g.name_id, r.symbols))
        c["sync"][:] = waits & (g.cls == ActivityClass.COMM)
        c["lane"][:] = g.lane + len(self.lane_labels)
        for name, local in (
            ("coll", g.coll_name_id),
            ("pg", g.pg_name_id),
            ("dtype", g.dtype_id),
            ("signature", g.signature_id),
            ("name", g.name_id),
            ("p2p", g.p2p_id),
        ):
            c[name][:] = _global_ids(local, r.symbols, table)
        c["pg_desc"][:] = _global_ids(*_descriptions(r), table)
        c["group"][:] = _global_ids(*_groups(r), table)
        c["op"][:] = _global_ids(_enclosing_c10d_op(r), r.symbols, table)
        self.lane_labels.extend(r.lane_label(i) for i in range(len(r.lanes)))
        self.process_groups[pos] = r.info.get("process_groups", {})
        self.cpu_run[pos] = r.cpu_run
        pg_count = r.info.get("pg_count")
        if (
            r.cpu_run
            and not self.process_groups[pos]
            and isinstance(pg_count, int)
            and pg_count > 1
        ):
            self.notes.append(
                f"rank {r.rank}: {pg_count} process groups but no pg_config in its trace: its "
                "collectives are matched as if in one group (metrics.md §5)"
            )

    def finish(self) -> RunActivities:
        h = self.headers
        cpu_groups.assign(  # metrics.md §5 "Process groups of CPU runs"
            self.cols,
            self.table,
            self.bounds,
            [x.rank for x in h],
            self.process_groups,
            self.cpu_run,
        )
        strings = [""] * len(self.table)
        for s, i in self.table.items():
            strings[i] = s
        return RunActivities(
            **self.cols,
            strings=tuple(strings),
            lane_labels=tuple(self.lane_labels),
            rank_ids=tuple(x.rank for x in h),
            hostnames=tuple(x.hostname for x in h),
            world_sizes=tuple(x.world_size for x in h),
            rank_bounds=self.bounds,
            notes=tuple(self.notes),
        )


def _needs_int64(values: np.ndarray) -> bool:
    info = np.iinfo(np.int32)
    return bool(values.min() < info.min or values.max() > info.max)


def run_activities(
    run: Run, visit: Callable[[int, RankTrace, int], None] | None = None
) -> RunActivities:
    """Concatenate the ranks' GPU tables with run-wide lane and string ids, reading each rank
    once; `visit(pos, rank, first_row)` is called on each as it is read (per-rank metrics in the
    same pass; `first_row`: the row of the rank's first activity in the table)."""
    if not run.ranks:
        raise ValueError("a run without ranks")
    table = ActivityTable(run.ranks.headers)
    for pos, r in enumerate(run.ranks):
        table.add(pos, r)
        if visit is not None:
            visit(pos, r, int(table.bounds[pos]))
    return table.finish()


def durations_ns(acts: RunActivities, rows: np.ndarray) -> np.ndarray:
    """The durations of the activities at `rows`, without a column for every row."""
    return acts.end_ns[rows] - acts.start_ns[rows]


def aligned(acts: RunActivities, offsets_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of every activity on the reference clock: t - o_rank (metrics.md §6)."""
    shift = offsets_ns[acts.rank_pos]
    return acts.start_ns - shift, acts.end_ns - shift


def exposed_ns(acts: RunActivities, compute_sets: list[iv.IntervalSet]) -> np.ndarray:
    """Per activity: its time not covered by compute on the same rank (own clock)."""
    out = acts.end_ns - acts.start_ns
    for pos, cover in enumerate(compute_sets):
        lo, hi = acts.rank_bounds[pos], acts.rank_bounds[pos + 1]
        out[lo:hi] = out[lo:hi] - iv.overlap_with_set(
            acts.start_ns[lo:hi], acts.end_ns[lo:hi], cover
        )
    return out
