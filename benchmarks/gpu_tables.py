"""Markdown tables of the recorded GPU results (benchmarks/results/h200x2-*.json) for
docs/benchmarks.md. Usage: python benchmarks/gpu_tables.py [results_dir]"""

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
    lines = ["| shape S,H,F | side | variant | median ms [p10–p90] | E | attained | speedup | output |",
             "|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        shape = f"{r['S']},{r['H']},{r['F']}"
        side = "AG-GEMM" if r["side"] == "ag" else "GEMM-RS"
        for name in ("gemm", "comm", "unfused"):
            t = r[name]
            label = {"gemm": "GEMM alone", "comm": "collective alone", "unfused": "unfused"}[name]
            lines.append(f"| {shape} | {side} | {label} | {t['median_ms']:.3f} [{t['p10_ms']:.3f}–{t['p90_ms']:.3f}] | | | | |")
        for v in r["variants"]:
            label = _label(v, r["side"])
            if "error" in v:
                lines.append(f"| {shape} | {side} | {label} | error: {v['error'][:80]} | | | | |")
                continue
            t = v["timing"]
            lines.append(
                f"| {shape} | {side} | {label} | {t['median_ms']:.3f} [{t['p10_ms']:.3f}–{t['p90_ms']:.3f}] | "
                f"{_f(v['E'])} | {_f(v['attained_saving'])} | {_f(v['speedup_vs_unfused'])}× | "
                f"{'matches' if v['ok'] else 'WRONG'} ({v['max_rel_err']:.1e}) |")
    return "\n".join(lines)


def _best(r: dict, cross_node: bool) -> dict | None:
    """The fastest fused variant of one bench result whose output matched; off NVLink not
    symm_mem (peer copies: not a cross-node result)."""
    ok = [v for v in r["variants"] if "timing" in v and v["ok"] and not (cross_node and v["mode"] == "symm_mem")]
    return min(ok, key=lambda v: v["timing"]["median_ms"]) if ok else None


def best_table(docs: dict[str, dict]) -> str:
    """Best fused variant per regime, shape and side, against unfused."""
    lines = ["| regime | shape S,H,F | side | unfused ms | best fused | ms | E | attained |",
             "|---|---|---|---|---|---|---|---|"]
    for regime, doc in docs.items():
        for r in doc["results"]:
            b = _best(r, cross_node=regime != "nvlink")
            if b is None:
                continue
            label = _label(b, r["side"])
            lines.append(f"| {regime} | {r['S']},{r['H']},{r['F']} | {r['side']} | {r['unfused']['median_ms']:.3f} | "
                         f"{label} | {b['timing']['median_ms']:.3f} | {_f(b['E'])} | {_f(b['attained_saving'])} |")
    return "\n".join(lines)


def runs_table(doc: dict) -> str:
    lines = ["| run | tp | regime | mode | median step ms | tokens/s | tokens/s per GPU | TP scaling efficiency | peak memory GiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    eff = {s["run"]: s["scaling_efficiency"] for s in doc["tp_scaling"]}
    for r in doc["runs"]:
        lines.append(f"| {r['run']} | {r['tp']} | {r['regime']} | {r['mode']} | {r['median_step_time_ms']:.1f} | "
                     f"{r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / r['tp']:,.0f} | "
                     f"{_f(eff.get(r['run']))} | {r['peak_memory_bytes'] / 2**30:.1f} |")
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
    """A sweep: tokens/s against its baseline, with the analyzer's exposed comm and contention."""
    base = doc["runs"][0]["tokens_per_s"]
    lines = ["| run | mode | tokens/s | vs unfused | exposed comm ratio | overlap ratio | contention slowdown |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        lines.append(f"| {r['run']} | {r['mode']} | {_throughput_cells(r, base)} | {_analyze_cells(r)} |")
    return "\n".join(lines)


def sweepv_table(doc: dict) -> str:
    """A sweep after the vocabulary-parallel change, with TP=1 scaling efficiency."""
    base = doc["runs"][0]["tokens_per_s"]
    lines = ["| run | mode | tokens/s | vs unfused | TP scaling efficiency | exposed comm ratio | overlap ratio | contention slowdown |",
             "|---|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        lines.append(f"| {r['run']} | {r['mode']} | {_throughput_cells(r, base)} | "
                     f"{_f(r.get('tp_scaling_efficiency'), 3)} | {_analyze_cells(r)} |")
    return "\n".join(lines)


def margin_table(doc: dict) -> str:
    """Per shape, side and SM margin: the GEMM alone and launched with the whole collective at
    that margin, and the best chunked/ring variant at that margin (NCCL's own CTA count)."""
    lines = ["| shape S,H,F | side | margin | GEMM alone ms | GEMM ‖ collective ms | best fused at this margin | ms | E | attained |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        shape, side = f"{r['S']},{r['H']},{r['F']}", "AG-GEMM" if r["side"] == "ag" else "GEMM-RS"
        lines.append(f"| {shape} | {side} | unfused | {r['gemm']['median_ms']:.3f} | collective alone "
                     f"{r['comm']['median_ms']:.3f} | unfused | {r['unfused']['median_ms']:.3f} | | |")
        for b in r.get("gemm_beside_comm", []):
            m = b["sm_margin"]
            ok = [v for v in r["variants"] if "timing" in v and v["ok"] and v.get("sm_margin", 0) == m
                  and not v.get("comm_ctas") and v["mode"] in ("chunked", "ring")]
            best = min(ok, key=lambda v: v["timing"]["median_ms"]) if ok else None
            tail = (f"{_label(best, r['side'])} | {best['timing']['median_ms']:.3f} | {_f(best['E'])} | "
                    f"{_f(best['attained_saving'])}") if best else "– | | |"
            lines.append(f"| {shape} | {side} | {m} | {b['gemm_alone']['median_ms']:.3f} | "
                         f"{b['timing']['median_ms']:.3f} | {tail} |")
    return "\n".join(lines)


def settings_table(docs: dict[str, dict]) -> str:
    """One bench per NCCL setting: per side, the collective alone, unfused and the best fused variant."""
    lines = ["| setting | side | collective alone ms | unfused ms | best fused | ms [p10–p90] | attained |",
             "|---|---|---|---|---|---|---|"]
    for name, doc in docs.items():
        for r in doc["results"]:
            b = _best(r, cross_node=True)
            t = b["timing"]
            lines.append(f"| {name} | {r['side']} | {r['comm']['median_ms']:.3f} | {r['unfused']['median_ms']:.3f} | "
                         f"{_label(b, r['side'])} | {t['median_ms']:.3f} [{t['p10_ms']:.3f}–{t['p90_ms']:.3f}] | "
                         f"{_f(b['attained_saving'])} |")
    return "\n".join(lines)


def fifth_round(root: Path) -> None:
    """The tables of issue 5's fifth round (NCCL's send/recv steps)."""
    settings = {"default (128 KiB steps)": "default", "NCCL_P2P_PCI_CHUNKSIZE=524288": "p2pchunk512k",
                "NCCL_P2P_PCI_CHUNKSIZE=2097152, NCCL_BUFFSIZE=16 MiB": "p2pchunk2m",
                "NCCL_BUFFSIZE=16 MiB": "buff16m"}
    docs = {k: json.loads((root / f"h200x2-benchnccl-shm-{v}.json").read_text()) for k, v in settings.items()
            if (root / f"h200x2-benchnccl-shm-{v}.json").exists()}
    if docs:
        print("### shm, one bench per NCCL setting, reference shape (gpu_levers27.sh)\n")
        print(settings_table(docs) + "\n")
    final = {"nvlink": "h200x2-benchpush-nvlink.json", "shm": "h200x2-benchp2p-shm.json",
             "shm, 8b shape": "h200x2-benchp2p-shm-8b.json",
             "shm, S=4096 and S=16384": "h200x2-benchp2p-shm-s4096-s16384.json",
             "socket": "h200x2-benchp2p-socket.json",
             "socket, 8b shape and S=4096": "h200x2-benchp2p-socket-8b-s4096.json"}
    docs = {regime: json.loads((root / name).read_text()) for regime, name in final.items() if (root / name).exists()}
    if "shm" not in docs:
        return
    print("### Best fused variant per regime and shape (fifth round, 512 KiB send/recv steps by default: "
          "shm and socket gpu_levers28.sh and gpu_levers31.sh; nvlink gpu_levers18.sh, whose copy_engine "
          "sends nothing through NCCL)\n")
    print(best_table(docs) + "\n")
    print("### shm, reference shape, 512 KiB send/recv steps (gpu_levers28.sh)\n")
    print(bench_table(docs["shm"]) + "\n")
    if "shm, 8b shape" in docs:
        print("### shm, 8B shape, 512 KiB send/recv steps (gpu_levers28.sh)\n")
        print(bench_table(docs["shm, 8b shape"]) + "\n")
    if "shm, S=4096 and S=16384" in docs:
        print("### shm, S=4096 and S=16384, 512 KiB send/recv steps (gpu_levers31.sh)\n")
        print(bench_table(docs["shm, S=4096 and S=16384"]) + "\n")
    if "socket" in docs:
        print("### socket, 512 KiB send/recv steps, 30 repetitions (gpu_levers28.sh)\n")
        print(bench_table(docs["socket"]) + "\n")


def levers_sweeps_table(root: Path) -> str:
    """Every sweep of gpu_levers*.sh: tokens/s against its own unfused run, with the analyzer's figures."""
    lines = ["| results file | run | tokens/s | vs unfused | exposed comm ratio | overlap ratio | contention slowdown "
             "| its coverage |", "|---|---|---|---|---|---|---|---|"]
    for path in sorted(root.glob("h200x2-levers*-*.json")):
        doc = json.loads(path.read_text())
        if "runs" not in doc:  # the auto probe cache kept beside the sweeps
            continue
        base = doc["runs"][0]["tokens_per_s"]
        for r in doc["runs"]:
            lines.append(f"| {path.name} | {r['run']} | {_throughput_cells(r, base)} | "
                         f"{_analyze_cells(r, (*ANALYZE_COLUMNS, 'contention_coverage'))} |")
    return "\n".join(lines)


def _load(root: Path, prefix: str) -> dict[str, dict]:
    docs = {}
    for regime in ("nvlink", "shm", "socket"):
        p = root / f"h200x2-{prefix}-{regime}.json"
        if p.exists():
            docs[regime] = json.loads(p.read_text())
    return docs


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")
    for prefix, title in (("bench", "gpu_matrix.sh"), ("bench5", "gpu_issue5.sh"), ("benchl", "gpu_levers.sh"),
                          ("benchce", "round robin: gpu_levers13.sh nvlink, gpu_levers12.sh shm and socket"),
                          ("benchcs", "round robin, S=4096 and S=16384: gpu_levers14.sh")):
        docs = _load(root, prefix)
        if not docs:
            continue
        print(f"### Best fused variant per regime and shape ({title})\n")
        print(best_table(docs) + "\n")
        if prefix == "benchl":
            continue  # 60 variants per side: the margin tables below and the JSON hold them
        for regime, doc in docs.items():
            if prefix in ("benchce", "benchcs") and regime != "nvlink":
                continue  # 18 variants per side: the best table above and the JSON hold them
            print(f"### {regime} ({title})\n")
            print(bench_table(doc) + "\n")
    fifth_round(root)
    fourth = {"nvlink": "h200x2-benchpush-nvlink.json", "shm": "h200x2-benchfinal-shm.json",
              "shm, 8b shape": "h200x2-benchtaper2-shm.json", "socket": "h200x2-benchfinal-socket.json"}
    docs = {regime: json.loads((root / name).read_text()) for regime, name in fourth.items() if (root / name).exists()}
    if docs:
        if "shm, 8b shape" in docs:  # its reference-shape rows are in the shm file of the final code
            tapered = docs["shm, 8b shape"]
            docs["shm, 8b shape"] = {**tapered, "results": [r for r in tapered["results"] if r["H"] != 8192]}
        title = ("GPU fed 5 ms ahead, final code: nvlink gpu_levers18.sh, shm gpu_levers22.sh (8b shape "
                 "gpu_levers20.sh), socket gpu_levers24.sh")
        print(f"### Best fused variant per regime and shape ({title})\n")
        print(best_table(docs) + "\n")
        print("### nvlink, the four shapes (GPU fed 5 ms ahead: gpu_levers18.sh)\n")
        print(bench_table(docs["nvlink"]) + "\n")
        agx = root / "h200x2-benchagx2-shm.json"
        if agx.exists():
            print("### shm GEMM-RS, ring exchanges at 40 repetitions (gpu_levers23.sh)\n")
            print(bench_table(json.loads(agx.read_text())) + "\n")
        print("### socket at 40 repetitions (gpu_levers24.sh)\n")
        print(bench_table(docs["socket"]) + "\n")
    for prio in ("default", "high"):
        docs = {}
        for regime in ("nvlink", "shm"):
            p = root / f"h200x2-benchp-{regime}-{prio}prio.json"
            if p.exists():
                docs[regime] = json.loads(p.read_text())
        if docs:
            env = next(iter(docs.values())).get("extra_env")
            print(f"### Best fused variant with {env} (gpu_priority.sh)\n")
            print(best_table(docs) + "\n")
    for extra in sorted(root.glob("h200x2-bench-*-*.json")):
        doc = json.loads(extra.read_text())
        print(f"### {doc['regime']} with {doc.get('extra_env')} (gpu_matrix.sh)\n")
        print(bench_table(doc) + "\n")
    for regime, doc in _load(root, "benchl").items():
        print(f"### {regime}: SM margins (gpu_levers.sh)\n")
        print(margin_table(doc) + "\n")
    if any(root.glob("h200x2-levers*-*.json")):
        print("### tpscope sweep, issue 5 second to fifth rounds (gpu_levers*.sh)\n")
        print(levers_sweeps_table(root) + "\n")
    runs = root / "h200x2-runs.json"
    if runs.exists():
        print("### Training runs, TP=1 and TP=2 (gpu_matrix.sh)\n")
        print(runs_table(json.loads(runs.read_text())) + "\n")
    for regime, doc in _load(root, "sweep").items():
        print(f"### tpscope sweep, {regime} (gpu_issue5.sh)\n")
        print(sweep_table(doc) + "\n")
    for regime, doc in _load(root, "sweepv").items():
        print(f"### tpscope sweep, {regime}, vocabulary-parallel embedding/head (gpu_vocab.sh)\n")
        print(sweepv_table(doc) + "\n")
    for regime, doc in _load(root, "sweephp").items():
        print(f"### tpscope sweep, {regime}, TORCH_NCCL_HIGH_PRIORITY=1 (gpu_priority.sh)\n")
        print(sweep_table(doc) + "\n")


if __name__ == "__main__":
    main()
