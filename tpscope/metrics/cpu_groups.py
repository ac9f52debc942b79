"""The process group of each collective of a CPU run (metrics.md §5 "Process groups of CPU runs").

gloo's collectives carry no group, but each runs on a worker thread of its own group, and
`distributedInfo.pg_config` lists the groups a rank belongs to. Each worker thread is given the
group whose other members ran a collective of the same name and size at the same time as its
collectives, most often; the columns of the run-wide activity table are then rewritten in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tpscope.trace import ActivityClass

# collectives whose output size follows from the group size (metrics.md §1)
OUT_PER_IN = {"all_gather": lambda x, n: x * n, "reduce_scatter": lambda x, n: x // n}


class _Meetings:
    """Which ranks run a collective of a row's name and size at the same time as the row: the
    rows sorted once by (rank, name and size, start), with a running maximum of ends within each
    such block; a query is one `searchsorted`."""

    def __init__(self, pos, coll, nelems, start, end) -> None:
        _, self.kind = np.unique(np.stack([coll, nelems], axis=1), axis=0, return_inverse=True)
        self.kind = self.kind.ravel().astype(np.int64)
        self.n_kinds = int(self.kind.max()) + 1
        self.base = int(start.min())
        self.span = int(max(end.max(), start.max())) - self.base + 2
        self.start, self.end = start, end
        block = pos.astype(np.int64) * self.n_kinds + self.kind
        order = np.argsort(block * self.span + (start - self.base), kind="stable")
        self.block = block[order]
        self.key = self.block * self.span + (start[order] - self.base)
        self.run_end = np.maximum.accumulate(self.block * self.span + (end[order] - self.base))

    def met(self, q_pos: np.ndarray, q_row: np.ndarray) -> np.ndarray:
        """Per query: whether the rank at `q_pos` runs a collective like row `q_row` (same name
        and size) whose time overlaps the row's."""
        asked = q_pos.astype(np.int64) * self.n_kinds + self.kind[q_row]
        at = np.searchsorted(
            self.key, asked * self.span + (self.end[q_row] - self.base), side="left"
        )
        at -= 1
        ok = at >= 0
        at = np.maximum(at, 0)
        ok &= self.block[at] == asked
        return ok & (self.run_end[at] - asked * self.span > self.start[q_row] - self.base)


def assign(
    cols: dict[str, np.ndarray],
    table: dict[str, int],
    bounds: np.ndarray,
    rank_ids: Sequence[int],
    groups: Sequence[dict[str, tuple[str, tuple[int, ...]]]],
    cpu_run: Sequence[bool],
) -> None:
    """metrics.md §5: rewrite `group`, `pg`, `pg_desc`, `group_size` and `out_nelems` of the
    described collectives of CPU ranks that list their groups. `cols` are the run-wide columns
    (`activities.ActivityTable`), `table` its strings; `groups[pos]` the pg_config of the rank
    at `pos` ({pg_name: (pg_desc, ranks)})."""
    present = set(rank_ids)
    strings = {i: s for s, i in table.items()}
    rows_of = [np.arange(bounds[p], bounds[p + 1]) for p in range(len(rank_ids))]
    comm = (cols["cls"] == ActivityClass.COMM) & (cols["coll"] >= 0) & (cols["p2p"] < 0)
    rows = np.concatenate([r[comm[r]] for p, r in enumerate(rows_of) if cpu_run[p]] or [[]])
    rows = rows.astype(np.int64)
    if len(rows) == 0:
        return
    # candidates: the groups of two ranks or more whose members are all in the folder
    cands = [
        [
            (name, desc, ranks)
            for name, (desc, ranks) in g.items()
            if len(ranks) >= 2 and set(ranks) <= present and rank_ids[p] in ranks
        ]
        for p, g in enumerate(groups)
    ]
    pos_of = {r: p for p, r in enumerate(rank_ids)}
    r_pos = cols["rank_pos"][rows].astype(np.int64)
    lane = cols["lane"][rows].astype(np.int64)
    threads, thread_of = np.unique(np.stack([r_pos, lane], axis=1), axis=0, return_inverse=True)
    thread_of = thread_of.ravel()
    meetings = _Meetings(
        r_pos,
        cols["coll"][rows],
        cols["in_nelems"][rows],
        cols["start_ns"][rows],
        cols["end_ns"][rows],
    )
    # per thread and candidate: how many of its collectives met every other member of the group
    chosen: dict[int, tuple[str, str, tuple[int, ...]]] = {}
    for t, (p, _) in enumerate(threads.tolist()):  # one per CPU thread that runs collectives
        options = cands[p]
        if not options:
            continue
        mine = np.flatnonzero(thread_of == t)
        scores = []
        for _name, _desc, ranks in options:  # a few groups per rank
            others = np.array([pos_of[r] for r in ranks if r != rank_ids[p]], np.int64)
            met = meetings.met(np.tile(others, len(mine)), np.repeat(mine, len(others)))
            scores.append(int(met.reshape(len(mine), len(others)).all(axis=1).sum()))
        # the most collectives met; ties to the larger group (a subset of a group meets as often)
        best = max(range(len(options)), key=lambda i: (scores[i], len(options[i][2])))
        if scores[best] > 0:
            chosen[t] = options[best]
    for t, (name, desc, ranks) in chosen.items():  # one per CPU thread
        sel = rows[thread_of == t]
        cols["group"][sel] = table.setdefault(f"{name} [{','.join(map(str, ranks))}]", len(table))
        cols["pg"][sel] = table.setdefault(name, len(table))
        if desc and desc != "undefined":
            cols["pg_desc"][sel] = table.setdefault(desc, len(table))
        cols["group_size"][sel] = len(ranks)
        for c in np.unique(cols["coll"][sel]).tolist():
            kind = strings.get(c, "").partition(":")[2]
            if kind not in OUT_PER_IN:
                continue
            these = sel[(cols["coll"][sel] == c) & (cols["out_nelems"][sel] < 0)]
            these = these[cols["in_nelems"][these] >= 0]
            cols["out_nelems"][these] = OUT_PER_IN[kind](cols["in_nelems"][these], len(ranks))
