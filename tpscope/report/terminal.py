"""Plain-text tables of an analysis for the terminal."""

from __future__ import annotations

from collections.abc import Sequence

from tpscope.metrics import RunAnalysis


def fmt(value: float | None, kind: str = "us") -> str:
    """A number for a table: µs with one decimal, ratios as percentages, None as '-'."""
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "x":
        return f"{value:.3f}"
    return f"{value:,.1f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> str:
    """A right-aligned text table (first column left-aligned)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [title] if title else []
    out += [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def step_table(analysis: RunAnalysis) -> str:
    headers = ["rank/step", "step_us", "compute_us", "comm_us", "hidden_us", "exposed_us", "memory_us",
               "idle_us", "exposed", "overlap", "overlap_eff", "wait_us", "transfer_us"]
    rows = [
        [
            f"{s.rank}/{s.step}",
            fmt(s.step_time_us), fmt(s.compute_us), fmt(s.comm_us), fmt(s.hidden_comm_us),
            fmt(s.exposed_comm_us), fmt(s.memory_us), fmt(s.idle_us),
            fmt(s.exposed_comm_ratio, "pct"), fmt(s.overlap_ratio, "pct"), fmt(s.overlap_efficiency, "pct"),
            fmt(s.comm_wait_us), fmt(s.comm_transfer_us),
        ]
        for s in analysis.steps
    ]
    return table(headers, rows, "Per rank and step (metrics.md §4)")


def summary_table(analysis: RunAnalysis) -> str:
    s = analysis.summary
    rows = [
        ["step time (mean over steps of the slowest rank)", fmt(s.step_time_us) + " us"],
        ["exposed communication", fmt(s.exposed_comm_ratio, "pct")],
        ["overlap (hidden / all communication)", fmt(s.overlap_ratio, "pct")],
        ["overlap efficiency (hidden / hideable)", fmt(s.overlap_efficiency, "pct")],
        ["critical-path exposed communication", fmt(s.critical_path_exposed_comm_ratio, "pct")],
        ["contention slowdown", fmt(s.contention_slowdown, "pct")],
        ["tokens/s (manifest)", fmt(s.tokens_per_s)],
    ]
    if s.flux_overlap_efficiency is not None or s.attained_saving is not None:
        rows += [["Flux overlap efficiency vs reference", fmt(s.flux_overlap_efficiency, "x")],
                 ["attained saving vs reference", fmt(s.attained_saving, "x")]]
    return table(["summary", "value"], rows)


def render(analysis: RunAnalysis, extra_sections: Sequence[str] = ()) -> str:
    """The whole terminal report."""
    parts = [f"run: {analysis.run_dir}   ranks: {analysis.ranks}", step_table(analysis), *extra_sections,
             summary_table(analysis)]
    if analysis.warnings:
        parts.append("warnings:\n" + "\n".join(f"  - {w}" for w in analysis.warnings))
    return "\n\n".join(parts)
