"""Markdown tables of recorded results, for the README of a result folder (benchmarks/run.py):
a bench's JSON (`tpscope bench --out DIR`'s `bench.json`), a sweep's `sweep.json`, run manifests, a script's rows.
Pure functions of the JSON; no torch, nothing of the analyzer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tpscope.fusion.tuning.labels import variant_label  # noqa: E402 - torch-free


def _f(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}"


def _label(v: dict, side: str) -> str:
    """tpscope.fusion's variant label, spelled for the docs' tables (`chunked k=4 rank-order`)."""
    return variant_label(v, side).replace("/k", " k=").replace("/", " ")


def bench_table(doc: dict) -> str:
    """One row per shape, side and variant: median ms [p10-p90], E, attained, check."""
    lines = [
        "| shape S,H,F | side | variant | median ms [p10–p90] | E | attained | speedup | output |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        shape = f"{r['S']},{r['H']},{r['F']}"
        side = "AG-GEMM" if r["side"] == "ag" else "GEMM-RS"
        for name in ("gemm", "comm", "unfused"):
            t = r[name]
            label = {"gemm": "GEMM alone", "comm": "collective alone", "unfused": "unfused"}[name]
            lines.append(
                f"| {shape} | {side} | {label} | {t['median_ms']:.3f} [{t['p10_ms']:.3f}–{t['p90_ms']:.3f}] | | | | |"
            )
        for v in r["variants"]:
            label = _label(v, r["side"])
            if "error" in v:
                lines.append(f"| {shape} | {side} | {label} | error: {v['error'][:80]} | | | | |")
                continue
            t = v["timing"]
            lines.append(
                f"| {shape} | {side} | {label} | {t['median_ms']:.3f} [{t['p10_ms']:.3f}–{t['p90_ms']:.3f}] | "
                f"{_f(v['E'])} | {_f(v['attained_saving'])} | {_f(v['speedup_vs_unfused'])}× | "
                f"{'matches' if v['ok'] else 'WRONG'} ({v['max_rel_err']:.1e}) |"
            )
    return "\n".join(lines)


def _best(r: dict, cross_node: bool) -> dict | None:
    """The fastest fused variant of one bench result whose output matched; off NVLink not
    symm_mem (peer copies: not a cross-node result)."""
    ok = [
        v
        for v in r["variants"]
        if "timing" in v and v["ok"] and not (cross_node and v["mode"] == "symm_mem")
    ]
    return min(ok, key=lambda v: v["timing"]["median_ms"]) if ok else None


def best_table(docs: dict[str, dict]) -> str:
    """Best fused variant per regime, shape and side, against unfused."""
    lines = [
        "| regime | shape S,H,F | side | unfused ms | best fused | ms | E | attained |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for regime, doc in docs.items():
        for r in doc["results"]:
            b = _best(r, cross_node=regime != "nvlink")
            if b is None:
                continue
            label = _label(b, r["side"])
            lines.append(
                f"| {regime} | {r['S']},{r['H']},{r['F']} | {r['side']} | {r['unfused']['median_ms']:.3f} | "
                f"{label} | {b['timing']['median_ms']:.3f} | {_f(b['E'])} | {_f(b['attained_saving'])} |"
            )
    return "\n".join(lines)


def runs_table(doc: dict) -> str:
    """Training runs recorded with their TP scaling efficiency (`{"runs": [...], "tp_scaling": [...]}`)."""
    lines = [
        "| run | tp | regime | mode | median step ms | tokens/s | tokens/s per GPU | TP scaling efficiency | peak memory GiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    eff = {s["run"]: s["scaling_efficiency"] for s in doc["tp_scaling"]}
    for r in doc["runs"]:
        lines.append(
            f"| {r['run']} | {r['tp']} | {r['regime']} | {r['mode']} | {r['median_step_time_ms']:.1f} | "
            f"{r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / r['tp']:,.0f} | "
            f"{_f(eff.get(r['run']))} | {r['peak_memory_bytes'] / 2**30:.1f} |"
        )
    return "\n".join(lines)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def manifests_table(manifests: dict[str, dict]) -> str:
    """`tpscope run` folders by name: speed, memory, and the loss from the first 5 steps' mean to the
    last 5's; beside each run, the largest per-step relative difference of its losses from the unfused
    run of the same TP size (the runs of one table share the model, data and seed)."""
    lines = [
        "| run | tp | regime | mode | chunks | median step ms | tokens/s | tokens/s per GPU | peak memory GiB "
        "| loss, first 5 → last 5 steps (mean) | fall | largest relative loss difference from unfused |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    unfused = {m.get("tp"): m.get("losses") for m in manifests.values() if m.get("mode") == "none"}
    for name, m in manifests.items():
        losses = m.get("losses") or []
        first, last = (_mean(losses[:5]), _mean(losses[-5:])) if losses else (None, None)
        base = unfused.get(m.get("tp"))
        diff = None
        if base and losses and m.get("mode") != "none" and len(base) == len(losses):
            diff = max(abs(c - b) / abs(b) for b, c in zip(base, losses))
        tps = m.get("tokens_per_s")
        lines.append(
            f"| {name} | {m.get('tp')} | {m.get('regime')} | {m.get('mode')} | {m.get('chunks')} | "
            f"{_f(m.get('median_step_time_ms'), 1)} | {_f(tps, 0)} | {_f(tps / m['tp'] if tps else None, 0)} | "
            f"{_f(m['peak_memory_bytes'] / 2**30 if m.get('peak_memory_bytes') else None, 1)} | "
            f"{_f(first, 4)} → {_f(last, 4)} | {_f((1 - last / first) * 100 if losses else None, 1)} % | "
            f"{'–' if diff is None else f'{diff:.2e}'} |"
        )
    return "\n".join(lines)


def rows_table(rows: list[dict]) -> str:
    """A script's result rows (a list of flat or one-level nested dicts) as one table."""
    flat = [
        {
            (f"{k}.{k2}" if isinstance(v, dict) else k): (v2 if isinstance(v, dict) else v)
            for k, v in row.items()
            for k2, v2 in (v.items() if isinstance(v, dict) else [(None, v)])
        }
        for row in rows
    ]
    cols = list(dict.fromkeys(c for row in flat for c in row))

    def cell(v) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        if isinstance(v, list):
            return ", ".join(cell(x) for x in v)
        return "–" if v is None else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in cols) + " |" for row in flat]
    return "\n".join(lines)


ANALYZE_COLUMNS = ("exposed_comm_ratio", "overlap_ratio", "contention_slowdown")
"""The analyzer's summary figures a sweep table shows, in this order."""


def _throughput_cells(r: dict, base: float) -> str:
    """tokens/s and the ratio to the sweep's unfused run."""
    return f"{r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / base:.3f}×"


def _analyze_cells(r: dict, keys: tuple[str, ...] = ANALYZE_COLUMNS) -> str:
    a = r.get("analyze") or {}
    return " | ".join(_f(a.get(k), 3) for k in keys)


def sweep_table(doc: dict) -> str:
    """A sweep: tokens/s against its unfused run, with the TP scaling efficiency and the analyzer's
    figures where the sweep's JSON has them."""
    base = doc["runs"][0]["tokens_per_s"]
    eff = any("tp_scaling_efficiency" in r for r in doc["runs"])
    head = ["run", "mode", "tokens/s", "vs unfused"] + (["TP scaling efficiency"] if eff else [])
    analyzed = any(r.get("analyze") for r in doc["runs"])
    if analyzed:
        head += [k.replace("_", " ") for k in ANALYZE_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["runs"]:
        cells = [r["run"], r["mode"], _throughput_cells(r, base)]
        if eff:
            cells.append(_f(r.get("tp_scaling_efficiency"), 3))
        if analyzed:
            cells.append(_analyze_cells(r))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def margin_table(doc: dict) -> str:
    """Per shape, side and SM margin: the GEMM alone and launched with the whole collective at
    that margin, and the best chunked/ring variant at that margin (NCCL's own CTA count)."""
    lines = [
        "| shape S,H,F | side | margin | GEMM alone ms | GEMM ‖ collective ms | best fused at this margin | ms | E | attained |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        shape, side = f"{r['S']},{r['H']},{r['F']}", "AG-GEMM" if r["side"] == "ag" else "GEMM-RS"
        lines.append(
            f"| {shape} | {side} | unfused | {r['gemm']['median_ms']:.3f} | collective alone "
            f"{r['comm']['median_ms']:.3f} | unfused | {r['unfused']['median_ms']:.3f} | | |"
        )
        for b in r.get("gemm_beside_comm", []):
            m = b["sm_margin"]
            ok = [
                v
                for v in r["variants"]
                if "timing" in v
                and v["ok"]
                and v.get("sm_margin", 0) == m
                and not v.get("comm_ctas")
                and v["mode"] in ("chunked", "ring")
            ]
            best = min(ok, key=lambda v: v["timing"]["median_ms"]) if ok else None
            tail = (
                (
                    f"{_label(best, r['side'])} | {best['timing']['median_ms']:.3f} | {_f(best['E'])} | "
                    f"{_f(best['attained_saving'])}"
                )
                if best
                else "– | | |"
            )
            lines.append(
                f"| {shape} | {side} | {m} | {b['gemm_alone']['median_ms']:.3f} | "
                f"{b['timing']['median_ms']:.3f} | {tail} |"
            )
    return "\n".join(lines)


def settings_table(docs: dict[str, dict]) -> str:
    """One bench per NCCL setting: per side, the collective alone, unfused and the best fused variant."""
    lines = [
        "| setting | side | collective alone ms | unfused ms | best fused | ms [p10–p90] | attained |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, doc in docs.items():
        for r in doc["results"]:
            b = _best(r, cross_node=True)
            t = b["timing"]
            lines.append(
                f"| {name} | {r['side']} | {r['comm']['median_ms']:.3f} | {r['unfused']['median_ms']:.3f} | "
                f"{_label(b, r['side'])} | {t['median_ms']:.3f} [{t['p10_ms']:.3f}–{t['p90_ms']:.3f}] | "
                f"{_f(b['attained_saving'])} |"
            )
    return "\n".join(lines)


def _is_bench(doc: dict) -> bool:
    return isinstance(doc.get("results"), list) and all("variants" in r for r in doc["results"])


def _is_sweep(doc: dict) -> bool:
    return isinstance(doc.get("runs"), list) and all(
        "tokens_per_s" in r and "mode" in r for r in doc["runs"]
    )


def doc_tables(name: str, doc: dict) -> list[tuple[str, str]]:
    """(title, table) for one recorded JSON document: a bench, a sweep, or a script's rows."""
    if _is_bench(doc):
        regime = doc.get("regime") or "?"
        env = doc.get("extra_env")
        where = f"{regime}{f', with {env}' if env else ''}"
        out = [
            (
                f"`{name}`: best fused variant per shape and side ({where})",
                best_table({regime: doc}),
            )
        ]
        if any(r.get("gemm_beside_comm") for r in doc["results"]):
            out.append((f"`{name}`: SM margins", margin_table(doc)))
        out.append((f"`{name}`: every variant", bench_table(doc)))
        return out
    if isinstance(doc.get("runs"), list) and isinstance(doc.get("tp_scaling"), list):
        return [(f"`{name}`: training runs", runs_table(doc))]
    if _is_sweep(doc):
        return [(f"`{name}`: tokens/s against the sweep's unfused run", sweep_table(doc))]
    for key in ("rows", "runs"):
        rows = doc.get(key)
        if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
            return [(f"`{name}`", rows_table(rows))]
    return []


def folder_tables(folder: Path) -> list[tuple[str, str]]:
    """The tables of a result folder: its JSON files (collected sweeps, scripts' results), each bench
    folder's `bench.json`, each sweep folder's `sweep.json`, and one table of every run folder's manifest."""
    out: list[tuple[str, str]] = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(doc, dict):
            out += doc_tables(path.name, doc)
    for path in sorted(folder.glob("*/bench.json")):  # `tpscope bench --out DIR`
        out += doc_tables(f"{path.parent.name}/bench.json", json.loads(path.read_text()))
    for path in sorted(folder.glob("*/sweep.json")):
        out += doc_tables(f"{path.parent.name}/sweep.json", json.loads(path.read_text()))
    manifests = {
        p.parent.name: json.loads(p.read_text()) for p in sorted(folder.glob("*/tpscope_run.jsonc"))
    }
    if manifests:
        out.append(("training runs (`tpscope run` folders)", manifests_table(manifests)))
    return out
