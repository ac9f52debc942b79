"""What a GPU stream does, named for people: compute, NCCL (and its process group), copy engine.

A lane's role comes from the classes of the activities on it (one rule table, ROLE_OF_CLASS):
the class holding most of the lane's busy time names it, and a second one that holds at least
MIXED_SHARE of it is added (`compute + NCCL`). A NCCL lane also names the process groups of its
collectives, as their kernels' metadata gives them (metrics.md §5).
"""

from __future__ import annotations

import numpy as np

from tpscope.trace import ActivityClass, RankTrace
from tpscope.trace.tables import CPU_LANE_DEVICE

ROLE_OF_CLASS = {
    ActivityClass.COMPUTE: "compute",
    ActivityClass.COMM: "NCCL",
    ActivityClass.MEMORY: "copy engine",
    ActivityClass.FILLER: "filler",
}
MIXED_SHARE = 0.2
MAX_GROUPS = 2


def lane_roles(r: RankTrace) -> list[str]:
    """Per row of `r.lanes`: its role (`NCCL · group tp`, `compute`, `compute + NCCL`), or `idle`."""
    g = r.gpu
    n = len(r.lanes)
    busy = np.zeros((n, len(ROLE_OF_CLASS)))
    np.add.at(busy, (g.lane, g.cls), (g.end_ns - g.start_ns).astype(float))
    roles = []
    for k in range(n):  # once per lane
        total = busy[k].sum()
        if total <= 0:
            roles.append("idle")
            continue
        order = np.argsort(-busy[k])
        parts = [ROLE_OF_CLASS[ActivityClass(int(order[0]))]]
        if busy[k, order[1]] >= MIXED_SHARE * total:
            parts.append(ROLE_OF_CLASS[ActivityClass(int(order[1]))])
        role = " + ".join(parts)
        if "NCCL" in parts:
            groups = _groups(r, k)
            if groups:
                role += " · group " + ", ".join(groups)
        roles.append(role)
    return roles


def _groups(r: RankTrace, lane: int) -> list[str]:
    g = r.gpu
    ids = np.unique(
        g.pg_name_id[(g.lane == lane) & (g.cls == ActivityClass.COMM) & (g.pg_name_id >= 0)]
    )
    names = [r.symbols[i] for i in ids.tolist()]
    return names[:MAX_GROUPS] + (["…"] if len(names) > MAX_GROUPS else [])


CPU_COMM = "collectives"  # a CPU run's communication (gloo's), in place of NCCL


def lane_names(r: RankTrace) -> list[str]:
    """Per lane: `stream 7 · NCCL · group 0` (the stream number as the trace gives it, then its
    role); a CPU run's lanes are its threads, `thread 12 · compute` (metrics.md §1)."""
    roles = lane_roles(r)
    return [
        f"thread {int(s)} · {role.replace('NCCL', CPU_COMM)}"
        if d == CPU_LANE_DEVICE
        else f"stream {int(s)} · {role}"
        for (d, s), role in zip(r.lanes.tolist(), roles)
    ]
