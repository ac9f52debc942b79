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


def _met(
    rank: np.ndarray,
    coll: np.ndarray,
    nelems: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    q_rank: np.ndarray,
    q_row: np.ndarray,
) -> np.ndarray:
    """Per query (a rank, a collective row): whether that rank runs a collective of the row's name
    and size whose time overlaps the row's. One sort and one `searchsorted`: rows keyed by
    (rank, name, size, start), with a running maximum of ends within each key."""
    keys = np.stack([rank, coll, nelems], axis=1)
    uniq, block = np.unique(
        np.concatenate([keys, np.stack([q_rank, coll[q_row], nelems[q_row]], axis=1)]),
        axis=0,
        return_inverse=True,
    )
    block = block.ravel().astype(np.int64)
    own, asked = block[: len(rank)], block[len(rank) :]
    base = int(start.min())
    span = int(max(end.max(), start.max())) - base + 2
    key = own * span + (start - base)
    order = np.argsort(key, kind="stable")
    key = key[order]
    run_end = np.maximum.accumulate(own[order] * span + (end[order] - base))
    at = np.searchsorted(key, asked * span + (end[q_row] - base), side="left") - 1
    ok = at >= 0
    at = np.maximum(at, 0)
    ok &= own[order][at] == asked
    return ok & (run_end[at] - asked * span > start[q_row] - base)


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
    rank, coll, nelems = cols["rank"][rows], cols["coll"][rows], cols["in_nelems"][rows]
    start, end = cols["start_ns"][rows], cols["end_ns"][rows]
    # per thread and candidate: how many of its collectives met every other member of the group
    chosen: dict[int, tuple[str, str, tuple[int, ...]]] = {}
    for t, (p, _) in enumerate(threads.tolist()):  # one per CPU thread that runs collectives
        options = cands[p]
        if not options:
            continue
        mine = np.flatnonzero(thread_of == t)
        scores = []
        for _name, _desc, ranks in options:  # a few groups per rank
            others = [pos_of[r] for r in ranks if r != rank_ids[p]]
            q_row = np.repeat(mine, len(others))
            q_rank = np.tile(np.array([rank_ids[o] for o in others], np.int64), len(mine))
            met = _met(rank, coll, nelems, start, end, q_rank, q_row)
            scores.append(int(met.reshape(len(mine), len(others)).all(axis=1).sum()))
        # the most collectives met; ties to the larger group (a subset of a group meets as often)
        best = max(range(len(options)), key=lambda i: (scores[i], len(options[i][2])))
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
