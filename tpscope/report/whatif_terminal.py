"""`tpscope whatif`'s tables for the terminal (metrics.md §11)."""

from __future__ import annotations

from tpscope.report.terminal import fmt, table


def _ratio(a: float | None) -> str:
    return "-" if a is None else f"{a:+.2%}"


def render(w) -> str:
    """The identity, the run's α-β fit, the pairs found, and one row per change."""
    parts = []
    ident = [
        [str(s), fmt(m), fmt(r), _ratio((r - m) / m if m else None)]
        for s, m, r in zip(w.steps, w.measured_steps_us, w.replayed_steps_us)
    ]
    ident.append(
        ["mean", fmt(w.measured_step_us), fmt(w.replayed_step_us), _ratio(w.identity_error)]
    )
    parts.append(
        f"{w.run_dir}: identity, the graph replayed unchanged (replay {w.replay_ms:.0f} ms; the "
        "mean leaves the first step out)\n"
        + table(["step", "measured_us", "replayed_us", "error"], ident)
    )
    inferred = w.inferred_us_per_step
    parts.append(
        "with each edge kind's median latency (per rank) instead of each activity's own gap: "
        f"{_ratio(w.median_latency_error)}"
    )
    parts.append(
        "inferred edges: "
        + ", ".join(f"{k} {fmt(v)}" for k, v in inferred.items())
        + (
            " µs per rank and step (held: a start set by another stream's kernel; thread: a CPU "
            "thread woken by another thread, or on a CPU run by a collective; unexplained: a gap "
            "no edge explains, not replayed)"
        )
        + (f"; {w.out_of_order} edges out of measured order" if w.out_of_order else "")
        + "".join(
            f"\n  {k}: most before "
            + ", ".join(f"{_short(name)} {fmt(us)}" for name, us in top)
            + " µs"
            for k, top in w.inferred_top.items()
            if top
        )
    )
    if w.alpha_beta:
        parts.append(
            "the run's α-β fit: transfer = α + bytes·busbw factor / β (metrics.md §5, §11)\n"
            + table(
                ["kind", "alpha_us", "busbw_GBps", "collectives", "residual"],
                [
                    [
                        f.kind,
                        fmt(f.alpha_us),
                        fmt(f.beta_gbps, "gbps"),
                        str(f.n),
                        f"{f.residual:.1%}",
                    ]
                    for f in w.alpha_beta
                ],
            )
            + _poor_fits(w.alpha_beta)
        )
    if w.pairs:
        parts.append("AG-GEMM / GEMM-RS pairs found: " + ", ".join(w.pairs))
    if w.changes:
        rows = []
        for p in w.changes:
            rows.append(
                [
                    p.change,
                    _steps_us(p.step_us),
                    fmt(p.predicted_step_us),
                    "-" if p.speedup is None else f"{p.speedup:.3f}x",
                    "-" if p.tokens_per_s is None else f"{p.tokens_per_s:,.0f}",
                    fmt(p.exposed_comm_us),
                    _path_text(p.path),
                ]
            )
        m = w.measured_path
        rows.insert(
            0,
            [
                "(measured)",
                _steps_us(w.measured_steps_us),
                fmt(w.measured_step_us),
                "1.000x",
                "-" if w.tokens_per_s is None else f"{w.tokens_per_s:,.0f}",
                fmt(w.measured_exposed_comm_us),
                _path_text(m),
            ],
        )
        parts.append(
            "predictions (mean step without the first; the critical path in µs per step)\n"
            + table(
                [
                    "change",
                    "per step (µs)",
                    "step_us",
                    "speedup",
                    "tokens/s",
                    "exposed_comm_us",
                    "critical path",
                ],
                rows,
            )
        )
        notes = [f"  {p.change}: {n}" for p in w.changes for n in p.notes]
        if notes:
            parts.append("\n".join(notes))
    return "\n\n".join(parts)


POOR_FIT = 0.5  # a residual above it: the kind's transfers do not follow α + bytes·f / β


def _poor_fits(fits) -> str:
    poor = [f.kind for f in fits if f.residual > POOR_FIT]
    if not poor:
        return ""
    return (
        f"\n{', '.join(poor)}: residual above {POOR_FIT:.0%}: these transfers do not follow "
        "α + bytes·f / β (waits or host work inside them, as gloo's on CPU), so what link= "
        "(its default α) and fuse= (its chunk transfers) take from this fit is rough"
    )


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def _steps_us(steps: list[float]) -> str:
    return " / ".join(f"{x:,.0f}" for x in steps)


def _path_text(path: dict | None) -> str:
    if not path:
        return "-"
    keys = ("compute_us", "comm_us", "memory_us", "host_us", "idle_us")
    return " ".join(f"{k[:-3]} {fmt(path[k])}" for k in keys if path.get(k))
