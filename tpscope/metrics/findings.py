"""What matters in a run, in words: its costs per step, largest first, each with where to look
(metrics.md §4, "What matters in a run").

One pure function over the analyzer's JSON document (`as_json`, metrics.md §10), so `tpscope
analyze`, `tpscope report` and the dashboard's Overview say the same things with the same numbers.
Each finding is a time the run loses per step (µs, the mean over the counted steps: the first
profiled step is left out as the summary leaves it out, §3), a sentence that says what it is and
what to try, the metrics.md section that defines it, and a target: the step and the selection
(`collective`, `gemm`, `class`, `search`) that shows its activities on the Timeline.

Rules, as data: a finding is kept when it costs at least MIN_SHARE of the step time; the
collectives and GEMM shapes are the TOP_COLLECTIVES and TOP_GEMMS that cost the most; two
communication shares that differ by more than EXPLAIN_GAP get a line saying why.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tpscope.numbers import number, size_text

MIN_SHARE = 0.005  # a finding under 0.5% of the step time is not one
TOP_COLLECTIVES = 3
TOP_GEMMS = 2
TOP_HOST_OPS = 3
EXPLAIN_GAP = 0.05  # exposed share per rank vs on the critical path: 5 pp or more, say why


@dataclass(frozen=True, slots=True)
class Finding:
    """One cost of a run. `cost_us` is per step (None for a line that is a bound, not a cost)."""

    kind: str  # exposed_comm, collective, gemm_tax, late_rank, host, idle, headroom
    title: str
    text: str
    cost_us: float | None
    section: str  # the metrics.md section that defines it ("§4"), "" for none
    step: int | None = None  # the step to open
    sel: dict = field(default_factory=dict)  # the Timeline selection: {"kind": ..., "key": ...}


def _us(x: float) -> str:
    return f"{x:,.0f} µs"


def _us1(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f} µs"


def _pct(x: float) -> str:
    return number(x, "ratio")


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def counted_steps(doc: dict) -> list[dict]:
    """The per-rank, per-step rows a summary counts: the first profiled step left out unless it is
    all there is or the run asked for it (§3)."""
    rows = doc.get("steps") or []
    if doc.get("first_step_included"):
        return list(rows)
    kept = [s for s in rows if not s.get("first_step")]
    return kept or list(rows)


def _counted_paths(doc: dict) -> list[dict]:
    paths = doc.get("critical_path") or []
    if doc.get("first_step_included"):
        return list(paths)
    kept = [p for p in paths if not p.get("first_step")]
    return kept or list(paths)


def _slowest_step(rows: list[dict]) -> int | None:
    return max(rows, key=lambda s: s["step_time_us"])["step"] if rows else None


def findings(doc: dict, headroom: list[tuple[str, float]] | None = None) -> list[Finding]:
    """The run's findings, largest cost per step first (the headroom lines, bounds, last).

    `headroom`: (what is hidden, the largest speedup it gives) pairs from a what-if replay, when
    one was run (metrics.md §11); each becomes a line."""
    rows = counted_steps(doc)
    if not rows:
        return []
    step_us = _mean(
        max(s["step_time_us"] for s in rows if s["step"] == n) for n in {s["step"] for s in rows}
    )
    steps = sorted({s["step"] for s in rows})
    slowest = _slowest_step(rows)
    cpu_run = bool(doc.get("cpu_run"))  # no GPU: the activities are CPU threads' ops (§1)
    out: list[Finding] = []
    out += _exposed(doc, rows, slowest)
    out += _collectives(doc, steps)
    out += _gemms(doc)
    out += _late_rank(rows, slowest, cpu_run)
    out += _path_parts(doc, cpu_run)
    kept = [f for f in out if f.cost_us is not None and f.cost_us >= MIN_SHARE * step_us]
    kept.sort(key=lambda f: -(f.cost_us or 0.0))
    kept += [headroom_finding(what, speedup) for what, speedup in headroom or ()]
    return kept


def headroom_finding(what: str, speedup: float) -> Finding:
    """A what-if replay's upper bound as a finding (metrics.md §11): it costs nothing per step and
    is listed after the costs."""
    return Finding(
        "headroom",
        f"Headroom: hiding {what}: at most {speedup:.2f}x",
        f"Replaying the run with {what} taking no time gives a step at most {speedup:.2f}x "
        "faster (an upper bound: the replay keeps every other dependency; tpscope whatif, §11).",
        None,
        "",
    )


def _exposed(doc, rows, slowest) -> list[Finding]:
    exposed = _mean(s["exposed_comm_us"] for s in rows)
    if exposed <= 0:
        return []
    summary = doc.get("summary") or {}
    share = summary.get("exposed_comm_ratio")  # Σ exposed / Σ step time (§4), as the summary says
    if share is None:
        share = exposed / _mean(s["step_time_us"] for s in rows)
    text = "Communication that no compute on the same rank hides, on the mean rank (§4)."
    paths = _counted_paths(doc)
    if paths:
        on_path = _mean(p["comm_us"] for p in paths)
        path_share = summary.get("critical_path_exposed_comm_ratio")
        if path_share is None:
            path_share = on_path / max(_mean(p["length_us"] for p in paths), 1e-9)
        text += f" On the critical path: {_us(on_path)} ({_pct(path_share)}, §7)."
        if share - path_share > EXPLAIN_GAP:
            wait = _mean(s.get("comm_wait_us") or 0.0 for s in rows)
            text += (
                f" They differ because {_us(min(wait, exposed))} of the exposed time is ranks "
                "waiting inside collectives for the last rank to arrive (§5), and the critical "
                "path skips a wait and follows the late rank's own work instead: hiding this "
                f"communication shortens the step by at most about {_pct(path_share)}, not {_pct(share)}."
            )
        elif path_share - share > EXPLAIN_GAP:
            text += (
                " More of the critical path than of the mean rank is communication: the path runs "
                "through the ranks and collectives that finish last."
            )
    text += " Try: overlap the collectives named below with independent compute (a fused mode)."
    return [
        Finding(
            "exposed_comm",
            f"Exposed communication: {_us(exposed)} per step ({_pct(share)})",
            text,
            exposed,
            "§4",
            slowest,
            {"kind": "class", "key": "comm"},
        )
    ]


def _collectives(doc, steps) -> list[Finding]:
    counted = set(steps)
    by_key: dict[str, list[dict]] = defaultdict(list)
    for c in doc.get("collectives") or []:
        if c.get("step") in counted and c.get("exposed_us") is not None:
            by_key[str(c["key"])].append(c)
    costs = []
    for key, cs in by_key.items():
        exposed = sum(c["exposed_us"] for c in cs) / len(counted)
        wait = min(exposed, sum(c.get("wait_us") or 0.0 for c in cs) / len(counted))
        worst = max(cs, key=lambda c: c["exposed_us"])
        costs.append((exposed, wait, key, worst))
    costs.sort(key=lambda x: -x[0])
    out = []
    for exposed, wait, key, worst in costs[:TOP_COLLECTIVES]:
        size = size_text(int(worst["bytes"])) if worst.get("bytes") else "size unknown"
        group = f", group {worst['group']}" if worst.get("group") else ""
        why = (
            f"; {_us(wait)} of it waiting for the last rank (§5)"
            if wait > 0.25 * exposed
            else ", mostly transfer"
        )
        out.append(
            Finding(
                "collective",
                f"Collective {key}: {_us(exposed)} per step exposed",
                f"{worst['collective']} ({size}{group}), on the rank it exposes most{why}; most in "
                f"step {worst['step']} ({_us(worst['exposed_us'])}).",
                exposed,
                "§5",
                int(worst["step"]),
                {"kind": "collective", "key": key},
            )
        )
    return out


def _gemms(doc) -> list[Finding]:
    rows = [g for g in doc.get("gemm_contention") or [] if g.get("tax_us_per_step")]
    rows.sort(key=lambda g: -g["tax_us_per_step"])
    out = []
    for g in rows[:TOP_GEMMS]:
        tax = g["tax_us_per_step"]
        split = ""
        base, same, ovl = g.get("baseline_us"), g.get("same_sm_us"), g.get("overlapped_median_us")
        if same is not None and base is not None and ovl is not None and ovl > base:
            fewer = tax * max(0.0, min(1.0, (same - base) / (ovl - base)))
            split = (
                f" Of the tax, {_us(fewer)} is from running on fewer SMs and "
                f"{_us(tax - fewer)} from interference (calibrated, §8)."
            )
        out.append(
            Finding(
                "gemm_tax",
                f"GEMM {g['shape']} taxed {_us(tax)} per step beside transfers",
                f"{number(g.get('slowdown'), 'relative')} slower beside a transfer: median "
                f"{_us1(ovl)} against {_us1(base)} alone ({g.get('n_overlapped')} overlapped, "
                f"{g.get('n_isolated')} alone, §8).{split} Try: fewer SMs for the collective, or a "
                "tile order that overlaps less.",
                tax,
                "§8",
                None,
                {"kind": "gemm", "key": g["shape"]},
            )
        )
    return out


CAUSES = (
    ("compute_us", "computes"),
    ("memory_us", "copies memory"),
    ("idle_us", "is idle"),
)
"""What a late rank does more than the others, per step: the field and its words."""


def _late_rank(rows, slowest, cpu_run: bool = False) -> list[Finding]:
    by_rank: dict[int, list[dict]] = defaultdict(list)
    for s in rows:
        by_rank[int(s["rank"])].append(s)
    if len(by_rank) < 2:
        return []
    wait = {r: _mean(s.get("comm_wait_us") or 0.0 for s in ss) for r, ss in by_rank.items()}
    late = min(wait, key=wait.get)
    others = [r for r in by_rank if r != late]
    cost = _mean(wait[r] for r in others) - wait[late]
    if cost <= 0:
        return []
    excess = []
    for key, words in CAUSES:
        mine = _mean(s.get(key) or 0.0 for s in by_rank[late])
        theirs = _mean(_mean(s.get(key) or 0.0 for s in by_rank[r]) for r in others)
        excess.append((mine - theirs, words))
    more, words = max(excess)
    cause = (
        f"rank {late} {words} {_us(more)} more per step than the others"
        if more > 0
        else "no class of its own work is longer: look at its "
        + ("threads between their ops" if cpu_run else "host (CPU) side")
        + " on the Timeline"
    )
    return [
        Finding(
            "late_rank",
            f"Rank {late} arrives last: the others wait {_us(cost)} per step for it",
            f"At the collectives the other ranks wait for it (§5): {cause}. Try: balance the work "
            f"per rank, or find what delays rank {late}.",
            cost,
            "§5",
            slowest,
            {"kind": "class", "key": "comm"},
        )
    ]


HOST_WORDS = {
    False: (
        "Host-bound: the critical path waits on the CPU {host} per step",
        "Time the GPU waits for the CPU to launch work (§7)",
        "CUDA graphs, fewer small ops or host syncs",
    ),
    True: (
        "Between ops: the critical path spends {host} per step on CPU threads outside their ops",
        "Time a thread spends between its innermost CPU ops: in the op or range around them, in "
        "Python, or waking from a wait (§7)",
        "fewer, larger ops (fused or compiled code), less Python per step",
    ),
}
"""The host finding's title, what it is and what to try: on a GPU run, and on a CPU run (§1), whose
critical path is its threads' ops and their time between them (§7)."""


def _path_parts(doc, cpu_run: bool = False) -> list[Finding]:
    paths = _counted_paths(doc)
    if not paths:
        return []
    out = []
    host = _mean(p.get("host_us") or 0.0 for p in paths)
    worst = max(paths, key=lambda p: p.get("host_us") or 0.0)
    if host > 0:
        ops: dict[str, float] = defaultdict(float)
        for p in paths:
            for name, us in (p.get("host_ops_us") or {}).items():
                ops[name] += us / len(paths)
        top = sorted(ops.items(), key=lambda x: -x[1])[:TOP_HOST_OPS]
        named = ", ".join(f"{n} {_us(us)}" for n, us in top)
        title, what, advice = HOST_WORDS[cpu_run]
        out.append(
            Finding(
                "host",
                title.format(host=_us(host)),
                f"{what}{': most in ' + named if named else ''}. Try: {advice}.",
                host,
                "§7",
                int(worst["step"]),
                {"kind": "search", "key": top[0][0]} if top else {},
            )
        )
    idle = _mean(p.get("idle_us") or 0.0 for p in paths)
    if idle > 0:
        out.append(
            Finding(
                "idle",
                f"Idle on the critical path: {_us(idle)} per step",
                "Stretches of the path with no activity (gaps no recorded dependency explains, "
                "§7).",
                idle,
                "§7",
                int(max(paths, key=lambda p: p.get("idle_us") or 0.0)["step"]),
                {},
            )
        )
    return out


def findings_text(found: list[Finding], top: int = 6) -> str:
    """The findings as numbered lines for a terminal or a Markdown list (plain text)."""
    lines = []
    for k, f in enumerate(found[:top], 1):
        lines.append(f"{k}. {f.title}. {f.text}")
    return "\n".join(lines)
