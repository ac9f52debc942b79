"""Plain rows for the views, taken from the analyzer's results (pure functions).

Tables and bars read the JSON document of `tpscope analyze --json` (`as_json`), so the page
shows exactly the analyzer's numbers. What the JSON does not carry (the activities a critical
path visits, each rank's kernel of a collective, contention per signature) is read from the
result objects when the analyzer provides it; every accessor returns an empty list when it
does not, and the views then say "not available" instead of guessing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

GIB = float(1 << 30)

OVERVIEW_COLUMNS = [
    ("run", "run"),
    ("status", "status"),
    ("mode", "mode"),
    ("regime", "regime"),
    ("ranks", "ranks"),
    ("steps", "steps"),
    ("step_time_us", "step time (µs)"),
    ("tokens_per_s", "tokens/s"),
    ("peak_memory_gib", "peak memory (GiB)"),
    ("exposed_comm_ratio", "exposed comm"),
    ("critical_path_exposed_comm_ratio", "critical-path exposed comm"),
    ("overlap_efficiency", "overlap efficiency"),
    ("contention_slowdown", "contention slowdown"),
]
RATIO_FIELDS = {"exposed_comm_ratio", "critical_path_exposed_comm_ratio", "overlap_efficiency",
                "contention_slowdown", "flux_overlap_efficiency", "attained_saving", "overlap_ratio"}


def plain(value: Any) -> Any:
    """Dataclasses, numpy scalars and tuples to plain JSON-able Python."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def overview_row(run_id: str, doc: dict, manifest: dict | None) -> dict:
    """One run's line of the Overview table (summary of the analyzer JSON, manifest extras)."""
    summary = doc.get("summary") or {}
    manifest = manifest or {}
    peak = manifest.get("peak_memory_bytes")
    row = {
        "run": run_id,
        "mode": manifest.get("mode"),
        "regime": manifest.get("regime"),
        "ranks": len(doc.get("ranks") or []),
        "steps": len({s["step"] for s in doc.get("steps") or []}),
        "peak_memory_gib": peak / GIB if isinstance(peak, (int, float)) else None,
        "status": f"{len(doc.get('warnings') or [])} warning(s)" if doc.get("warnings") else "ok",
    }
    for key in ("step_time_us", "tokens_per_s", "exposed_comm_ratio", "critical_path_exposed_comm_ratio",
                "overlap_efficiency", "contention_slowdown"):
        row[key] = summary.get(key)
    return row


def error_row(run_id: str, message: str) -> dict:
    row: dict = {key: None for key, _ in OVERVIEW_COLUMNS}
    row["run"] = run_id
    row["status"] = "error: " + message
    return row


def step_numbers(doc: dict) -> list[int]:
    return sorted({int(s["step"]) for s in doc.get("steps") or []})


def step_rows(doc: dict, ranks: list[int] | None = None) -> list[dict]:
    """The JSON's per-rank, per-step rows, for `ranks` (all when None), by rank then step."""
    rows = [s for s in doc.get("steps") or [] if ranks is None or s["rank"] in ranks]
    return sorted(rows, key=lambda s: (s["rank"], s["step"]))


def critical_path_rows(doc: dict) -> list[dict]:
    return sorted(doc.get("critical_path") or [], key=lambda c: c.get("step", 0))


def collective_rows(doc: dict, step: int | None = None) -> list[dict]:
    """The JSON's collective instances (of one step when given), lists shown as text."""
    out = []
    for c in doc.get("collectives") or []:
        if step is not None and c.get("step") != step:
            continue
        row = {k: (", ".join(map(str, v)) if isinstance(v, list) and k in ("ranks", "key") else v)
               for k, v in c.items() if not isinstance(v, (dict, list)) or k in ("ranks", "key")}
        out.append(row)
    return out


# ---- results beyond the JSON (read from the objects when the analyzer provides them) --------

def _get(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if not isinstance(obj, dict) and hasattr(obj, n):
            return getattr(obj, n)
    return default


def arrival_rows(analysis: Any, step: int | None = None) -> list[dict]:
    """Per collective instance and rank: the kernel's start relative to the first arrival (µs).

    Read from each instance's per-rank kernels (`kernels`/`per_rank`: rank, start_ns, end_ns,
    wait_ns) when the analyzer provides them; empty otherwise.
    """
    out = []
    for i, c in enumerate(getattr(analysis, "collectives", None) or []):
        if step is not None and _get(c, "step") != step:
            continue
        kernels = per_rank_kernels(c)
        if not kernels:
            continue
        first = min(k["start_ns"] for k in kernels)
        for k in kernels:
            out.append({"instance": i, "key": str(_get(c, "key", default=i)),
                        "collective": _get(c, "collective"), "rank": k["rank"],
                        "arrival_us": (k["start_ns"] - first) / 1000.0})
    return out


def per_rank_kernels(instance: Any) -> list[dict]:
    """[{rank, start_ns, end_ns, wait_ns, lane}] of one collective instance, or []."""
    kernels = _get(instance, "kernels", "per_rank", "members", default=None)
    if not kernels:
        return []
    out = []
    for k in kernels:
        rank = _get(k, "rank")
        start, end = _get(k, "start_ns"), _get(k, "end_ns")
        if rank is None or start is None or end is None:
            continue
        wait = _get(k, "wait_ns")
        if wait is None and _get(k, "wait_us") is not None:
            wait = _get(k, "wait_us") * 1000
        out.append({"rank": int(rank), "start_ns": int(start), "end_ns": int(end),
                    "wait_ns": None if wait is None else int(wait), "lane": _get(k, "lane")})
    return out


def collective_kernels(analysis: Any, step: int) -> list[list[dict]]:
    """Each matched instance of `step` as its per-rank kernels (for the Timeline's links)."""
    out = []
    for c in getattr(analysis, "collectives", None) or []:
        if _get(c, "step") == step:
            kernels = per_rank_kernels(c)
            if len(kernels) > 1:
                out.append(kernels)
    return out


def critical_path_segments(analysis: Any, step: int) -> list[dict]:
    """The activities the critical path of `step` visits: [{rank, lane, start_ns, end_ns, kind}]."""
    for cp in getattr(analysis, "critical_path", None) or []:
        if _get(cp, "step") != step:
            continue
        items = _get(cp, "segments", "activities", "path", "nodes", default=None) or []
        out = []
        for it in items:
            start, end = _get(it, "start_ns"), _get(it, "end_ns")
            if start is None or end is None:
                continue
            out.append({"rank": _get(it, "rank"), "lane": _get(it, "lane"), "start_ns": int(start),
                        "end_ns": int(end), "kind": str(_get(it, "kind", "cls", default=""))})
        return out
    return []


def contention_rows(analysis: Any) -> list[dict]:
    """Per kernel signature: isolated and overlapped median durations and the slowdown."""
    rows = []
    items = _get(analysis, "contention", "contention_by_signature", default=None) or []
    for it in items:
        row = plain(it)
        if not isinstance(row, dict):
            continue
        iso = _get(row, "isolated_median_us", "median_isolated_us", "isolated_us")
        ovl = _get(row, "overlapped_median_us", "median_overlapped_us", "overlapped_us")
        if iso is None or ovl is None:
            continue
        rows.append({"signature": str(_get(row, "signature", "name", "kernel", default="?")),
                     "isolated_median_us": float(iso), "overlapped_median_us": float(ovl),
                     "slowdown": _get(row, "slowdown"),
                     "n_isolated": _get(row, "n_isolated", "isolated_count"),
                     "n_overlapped": _get(row, "n_overlapped", "overlapped_count")})
    return rows
