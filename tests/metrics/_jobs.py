"""4-rank jobs built from real 2-rank H200 runs by rewriting rank and process-group metadata.

Each rank of the 4-rank job is a real rank file of a 2-rank run, its `distributedInfo` and every
collective's `Process Group Name` / `Process Group Ranks` rewritten, its clock shifted by a known
amount. The expected matches follow from the construction, never from the analyzer:

- `tp_dp`: TP groups {0, 1} and {2, 3}, both named "tp" (torch names split groups alike), from the
  all-gathers; DP groups {0, 2} ("dp0") and {1, 3} ("dp1") from the reduce-scatters. Ranks 2 and 3
  are copies of ranks 0 and 1 on another host whose clock runs `shift_us` ahead.
- `tp_pp`: pipeline stages {0, 1} and {2, 3}; TP groups as above from the all-gathers,
  reduce-scatters and all-reduces; PP groups {0, 2} ("pp0") and {1, 3} ("pp1") from the send/recv
  ring's `send` / `recv` ops (`Dst Rank` / `Src Rank` are group-local: 1 is the other stage).
  Stage 0 is the ring run's rank 0, stage 1 its rank 1; ranks 1 and 3 are copies of 0 and 2.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHUNKED = ROOT / "tests" / "data" / "h200-shm-chunked4"  # all-gathers and reduce-scatters
RING = ROOT / "sample_traces" / "h200x2-nvlink-ring"  # send/recv ring, all-gathers, all-reduces


def _docs(run: Path) -> list[dict]:
    files = sorted(p for p in run.iterdir() if p.name.endswith(".json.gz"))
    docs = [json.loads(gzip.decompress(p.read_bytes())) for p in files]
    return sorted(docs, key=lambda d: d["distributedInfo"]["rank"])


def _rewrite(
    doc: dict,
    rank: int,
    groups: dict[str, tuple[str, list[int]]],
    shift_us: float,
    hostname: str | None,
) -> dict:
    """`groups`: collective name -> (group name, global ranks)."""
    doc = json.loads(json.dumps(doc))
    info = doc["distributedInfo"]
    info.update(rank=rank, world_size=4)
    config = {name: ranks for name, ranks in groups.values()}
    info["pg_config"] = [
        {"pg_name": n, "pg_desc": n.rstrip("01"), "pg_size": len(r), "ranks": r}
        for n, r in sorted(config.items())
    ]
    info["pg_count"] = len(config)
    if hostname:
        doc["hostname"] = hostname
    for e in doc["traceEvents"]:
        if "ts" in e and e.get("ph") == "X":
            e["ts"] = float(e["ts"]) + shift_us
        a = e.get("args") or {}
        name = a.get("Collective name")
        if name in groups:
            pg, ranks = groups[name]
            a.update(
                {
                    "Process Group Name": pg,
                    "Process Group Ranks": str(ranks),
                    "Process Group Description": pg.rstrip("01"),
                    "Group size": len(ranks),
                }
            )
    return doc


def _write(folder: Path, docs: list[dict]) -> Path:
    folder.mkdir(parents=True)
    for d in docs:
        (folder / f"rank{d['distributedInfo']['rank']}.pt.trace.json.gz").write_bytes(
            gzip.compress(json.dumps(d).encode())
        )
    return folder


def tp_dp(folder: Path, shift_us: float) -> Path:
    """See the module docstring."""
    a, b = _docs(CHUNKED)
    tp = {0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}
    dp = {0: ("dp0", [0, 2]), 2: ("dp0", [0, 2]), 1: ("dp1", [1, 3]), 3: ("dp1", [1, 3])}
    docs = []
    for rank, src, shift, host in (
        (0, a, 0.0, "node-a"),
        (1, b, 0.0, "node-a"),
        (2, a, shift_us, "node-b"),
        (3, b, shift_us, "node-b"),
    ):
        groups = {"_allgather_base": ("tp", tp[rank]), "_reduce_scatter_base": dp[rank]}
        docs.append(_rewrite(src, rank, groups, shift, host))
    return _write(folder, docs)


def tp_pp(folder: Path) -> Path:
    """See the module docstring."""
    a, b = _docs(RING)
    docs = []
    for rank, src in ((0, a), (1, a), (2, b), (3, b)):
        tp = ("tp", [0, 1] if rank < 2 else [2, 3])
        pp = ("pp0", [0, 2]) if rank % 2 == 0 else ("pp1", [1, 3])
        groups = {
            "_allgather_base": tp,
            "_reduce_scatter_base": tp,
            "allreduce": tp,
            "send": pp,
            "recv": pp,
        }
        docs.append(_rewrite(src, rank, groups, 0.0, None))
    return _write(folder, docs)
