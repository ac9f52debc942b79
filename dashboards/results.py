"""Plain rows for the views, taken from the analyzer's results (pure functions).

Tables and bars read the JSON document of `tpscope analyze --json` (`as_json`), so the page
shows exactly the analyzer's numbers; contention per signature, which the JSON does not carry,
comes from the same `RunAnalysis` objects. An empty list means "not available" to the views.
"""

from __future__ import annotations

from typing import Any

from tpscope.jsonable import plain
from tpscope.metrics.contention_rank import ranked_kernels, shown_gemm_shapes
from tpscope.numbers import number
from tpscope.runfolder.manifest import Manifest

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
    ("hidden_of_hideable_ratio", "hidden of hideable comm"),
    ("contention_slowdown", "contention slowdown"),
    ("flux_overlap_efficiency", "Flux E vs baseline"),
    ("attained_saving", "attained saving vs baseline"),
]
RATIO_FIELDS = {
    "exposed_comm_ratio",
    "critical_path_exposed_comm_ratio",
    "hidden_of_hideable_ratio",
    "contention_slowdown",
    "flux_overlap_efficiency",
    "attained_saving",
    "overlap_ratio",
}


def overview_row(run_id: str, doc: dict, manifest: Manifest | None) -> dict:
    """One run's line of the Overview table (summary of the analyzer JSON, manifest extras)."""
    summary = doc.get("summary") or {}
    manifest = manifest or Manifest()
    peak = manifest.peak_memory_bytes
    row = {
        "run": run_id,
        "mode": manifest.mode,
        "regime": manifest.regime,
        "ranks": len(doc.get("ranks") or []),
        "steps": len({s["step"] for s in doc.get("steps") or []}),
        "peak_memory_gib": peak / GIB if peak is not None else None,
        "status": f"{len(doc.get('warnings') or [])} warning(s)" if doc.get("warnings") else "ok",
    }
    for key in (
        "step_time_us",
        "tokens_per_s",
        "exposed_comm_ratio",
        "critical_path_exposed_comm_ratio",
        "hidden_of_hideable_ratio",
        "contention_slowdown",
    ):
        row[key] = summary.get(key)
    return row


def with_baseline(row: dict, summary: dict | None) -> dict:
    """The row plus Flux E and attained saving against the baseline (metrics.md §9), when compared."""
    summary = summary or {}
    return {
        **row,
        "flux_overlap_efficiency": summary.get("flux_overlap_efficiency"),
        "attained_saving": summary.get("attained_saving"),
    }


PENDING = "reading…"
"""The Overview's status of a run whose analysis has not arrived yet."""


def pending_row(run_id: str) -> dict:
    row: dict = {key: None for key, _ in OVERVIEW_COLUMNS}
    row["run"] = run_id
    row["status"] = PENDING
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
        row = {
            k: (", ".join(map(str, v)) if isinstance(v, list) and k in ("ranks", "key") else v)
            for k, v in c.items()
            if not isinstance(v, (dict, list)) or k in ("ranks", "key")
        }
        out.append(row)
    return out


def contention_rows(analysis: Any) -> list[dict]:
    """Per compute-kernel signature above the floor of significance: isolated and overlapped
    durations and the tax per rank and step, the most tax first (metrics.md §8, "Ranking")."""
    ranked, _under = ranked_kernels(
        getattr(analysis, "kernel_contention", None) or [], len(getattr(analysis, "steps", ()))
    )
    return [plain(k) for k in ranked]


def gemm_contention_rows(analysis: Any) -> list[dict]:
    """Per GEMM shape above the floor of significance (a baseline and GEMMs beside a transfer, enough
    of each, medians apart): alone, same-SM and overlapped medians, the most taxed first
    (metrics.md §8, "Ranking")."""
    shown, _under = shown_gemm_shapes(getattr(analysis, "gemm_contention", None))
    return [plain(g) for g in shown]


def gemm_budget_text(analysis: Any) -> str:
    """The GEMM time budget per rank and step in one sentence (§8), '' without one."""
    b = getattr(analysis, "gemm_budget", None)
    if b is None or not b.overlapped_us:
        return ""
    band = "±" + number(b.noise_band, "ratio") if b.noise_band is not None else "unknown"

    def n(us: float) -> str:
        return number(us, "count")

    text = (
        f" GEMM time per rank and step: {n(b.gemm_us)} µs = {n(b.predicted_us)} alone + {n(b.tax_us)} "
        f"tax ({n(b.sm_us)} fewer SMs, {n(b.interference_us)} interference, {n(b.unsplit_us)} not split) "
        f"+ {n(b.uncovered_us)} without a baseline + {n(b.residual_us)} unexplained (noise band {band})."
    )
    layers = getattr(analysis, "contention_by_layer", None) or []
    if layers:
        text += " Most taxed: " + ", ".join(f"{p.name} {n(p.tax_us)} µs" for p in layers[:3]) + "."
    return text


def comm_contention_rows(analysis: Any) -> list[dict]:
    """Per collective shape with both sides: transfer isolated versus beside compute (§8)."""
    return [
        plain(c)
        for c in getattr(analysis, "comm_contention", None) or []
        if c.isolated_transfer_us is not None and c.overlapped_transfer_us is not None
    ]


def step_summaries(doc: dict) -> list[dict]:
    """Per step over its ranks: `time_us`, the slowest rank's step time (the step ends when its
    last rank does), `exposed_ratio`, exposed communication over step time summed over the ranks
    (metrics.md §4), `first`, true for the first profiled step (a warm-up the summary leaves out,
    §3), and `slowest`, true for the step with the longest time among the others (the page opens
    on it)."""
    by_step: dict[int, list[dict]] = {}
    for s in doc.get("steps") or []:
        by_step.setdefault(int(s["step"]), []).append(s)
    out = []
    for step in sorted(by_step):
        rows = by_step[step]
        time_us = max(float(r.get("step_time_us") or 0.0) for r in rows)
        total = sum(float(r.get("step_time_us") or 0.0) for r in rows)
        exposed = sum(float(r.get("exposed_comm_us") or 0.0) for r in rows)
        out.append(
            {
                "step": step,
                "time_us": time_us,
                "exposed_ratio": exposed / total if total > 0 else None,
                "first": any(r.get("first_step") for r in rows)
                and not doc.get("first_step_included"),
                "slowest": False,
            }
        )
    steady = [r for r in out if not r["first"]] or out
    if steady:
        max(steady, key=lambda r: r["time_us"])["slowest"] = True
    return out


def step_label(summary: dict) -> str:
    """The step picker's text: `step 3 · 1,968.3 µs · 57.4% exposed`, the slowest marked."""
    exposed = summary["exposed_ratio"]
    text = f"step {summary['step']} · {number(summary['time_us'], 'us', with_unit=False)} µs · "
    if summary.get("first"):
        text = text.replace(" · ", " (first, warm-up) · ", 1)
    text += "exposed not available" if exposed is None else f"{number(exposed, 'ratio')} exposed"
    return text + (" · slowest" if summary["slowest"] else "")


def comparable(mine: Manifest | None, base: Manifest | None, keys: tuple[str, ...]) -> str | None:
    """Why two runs' manifests describe different experiments (`regime shm vs nvlink`), or None
    when every key both manifests state is equal (metrics.md §9: same model shape and regime)."""
    if mine is None or base is None:
        return None
    pairs = [(k, getattr(mine, k), getattr(base, k)) for k in keys]
    differ = [f"{k} {m} vs {b}" for k, m, b in pairs if m is not None and b is not None and m != b]
    return ", ".join(differ) or None
