"""The critical path's `thread` edges (metrics.md §7): where one CPU thread's work waited for
another's, found as arrays (sorts and `searchsorted`, loops over threads, never over events).

In a CPU run (metrics.md §1) a collective runs on a worker thread of the process group, issued by
a thread's `c10d::` op (or `record_param_comms`): the collective waited for the issuing thread to
get there. A thread that issued a collective and has no activity until after it ended waited for
it (the blocking `wait()` records no op).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.trace import ActivityClass, RankTrace
from tpscope.trace.cpu_activities import BLOCKING_WAITS

# metrics.md §7: CPU ops that issue a CPU run's collective, by name prefix (the blocking waits of
# these namespaces issue nothing)
ISSUE_OP_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::", "record_param_comms")


@dataclass(frozen=True, slots=True)
class CpuRunWaits:
    """Per activity of a CPU run's rank (its `GpuActivities` rows)."""

    tid: np.ndarray  # the activity's thread
    issuer_tid: np.ndarray  # a collective: the thread of the op that issued it, -1
    issuer_prev: np.ndarray  # and that thread's last activity ending by its start, -1
    issuer_name_id: np.ndarray  # and the issuing op's name (a symbol id), -1
    waited_coll: np.ndarray  # the collective its thread issued and waited for before it, -1


def _issue_ops(r: RankTrace) -> np.ndarray:
    """Rows of the rank's CPU ops that issue collectives."""
    ops = r.cpu_ops
    ids = np.unique(ops.name_id)
    hit = np.array(
        [
            k >= 0
            and r.symbols[k].startswith(ISSUE_OP_PREFIXES)
            and r.symbols[k] not in BLOCKING_WAITS
            for k in ids.tolist()
        ],
        bool,
    )
    return np.flatnonzero(hit[np.searchsorted(ids, ops.name_id)]) if len(ids) else np.zeros(0, int)


def cpu_run_waits(
    r: RankTrace, start: np.ndarray, end: np.ndarray, lane_prev: np.ndarray, shift: int
) -> CpuRunWaits:
    """The `thread` edges of one CPU-run rank; `start`, `end` are its activities' aligned times
    (the rank's CPU ops less `shift` are on the same clock)."""
    g = r.gpu
    n = len(g)
    tid = r.lanes[g.lane, 1] if n else np.zeros(0, np.int64)
    issuer_tid = np.full(n, -1, np.int64)
    issuer_prev = np.full(n, -1, np.int64)
    waited = np.full(n, -1, np.int64)
    issuer_name = np.full(n, -1, np.int64)
    comm = np.flatnonzero(g.cls == ActivityClass.COMM)
    issue = _issue_ops(r)
    if len(comm) == 0 or len(issue) == 0:
        return CpuRunWaits(tid, issuer_tid, issuer_prev, issuer_name, waited)
    # the issuing op: the last to start by the collective's start, on another thread
    i_start = r.cpu_ops.start_ns[issue] - shift
    order = np.argsort(i_start, kind="stable")
    i_start, i_tid = i_start[order], r.cpu_ops.tid[issue][order]
    i_name = r.cpu_ops.name_id[issue][order]
    k = np.searchsorted(i_start, start[comm], side="right") - 1
    ok = (k >= 0) & (i_tid[np.maximum(k, 0)] != tid[comm])
    issuer_tid[comm[ok]] = i_tid[k[ok]]
    issuer_name[comm[ok]] = i_name[k[ok]]
    for t in np.unique(issuer_tid[comm[ok]]).tolist():  # a loop over threads, not events
        mine = comm[issuer_tid[comm] == t]
        # that thread's last activity to end by the collective's start
        on = np.flatnonzero(tid == t)
        if len(on) == 0:  # the issuing thread ran no activity of its own
            continue
        on = on[np.argsort(end[on], kind="stable")]
        j = np.searchsorted(end[on], start[mine], side="right") - 1
        issuer_prev[mine] = np.where(j >= 0, on[np.maximum(j, 0)], -1)
        # the thread's activities that follow a gap in which one of these collectives ended
        mine = mine[np.argsort(end[mine], kind="stable")]
        gap_lo = np.where(
            lane_prev[on] >= 0, end[np.maximum(lane_prev[on], 0)], np.iinfo(np.int64).min
        )
        m = np.searchsorted(end[mine], start[on], side="right") - 1
        hit = (m >= 0) & (end[mine[np.maximum(m, 0)]] > gap_lo)
        waited[on[hit]] = mine[m[hit]]
    return CpuRunWaits(tid, issuer_tid, issuer_prev, issuer_name, waited)
