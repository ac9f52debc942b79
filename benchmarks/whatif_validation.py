"""The what-if replay against measured runs (docs/metrics.md §11, "Validation"): from each unfused
sample run, each fused sample run of the same regime predicted (its per-layer modes and chunks
from its manifest) and compared with the step time measured in its own trace; and the shm
unfused run predicted from the nvlink one through the shm link model.

    PYTHONPATH=. python3 benchmarks/whatif_validation.py      # prints the docs' tables

Three ways to time the GEMMs beside a transfer: `loo` takes the contention (and the chunk
transfers' α-β fit, and its isolated chunk GEMMs) from the OTHER fused run of the regime whose
transfers are of the same kind (SM or copy engine), else the assumed slowdown; `assumed` uses no
fused run at all; `own` takes them from the predicted run itself (a ceiling of the model, not a
prediction). The measured step time is the analyzer's step time of each steady step (metrics.md
§3: the longest rank's period), a computation independent of the replay.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpscope.metrics import analyze_run  # noqa: E402
from tpscope.metrics.whatif import (  # noqa: E402
    contention_source,
    predict,
    prepare,
    transfer_kind,
)
from tpscope.metrics.whatif_changes import parse_change  # noqa: E402
from tpscope.runfolder.layout import manifest_path  # noqa: E402
from tpscope.trace import load_run  # noqa: E402

SAMPLES = ROOT / "sample_traces"
TARGETS = {"nvlink": ("ring", "copy_engine", "auto"), "shm": ("chunked", "auto")}
LAYER_PREFIX = "tpscope/"


def run_dir(regime: str, mode: str) -> Path:
    return SAMPLES / f"h200x2-{regime}-{mode}"


@cache
def inputs(path: Path):
    return prepare(load_run(path, workers=1))


@cache
def measured_step_us(path: Path) -> float:
    """The mean step time of the steady steps (§3: per step the longest rank's period), from the
    run's own trace."""
    by_step: dict[int, float] = {}
    for s in analyze_run(load_run(path, workers=1)).steps:
        if not s.first_step:
            by_step[s.step] = max(by_step.get(s.step, 0.0), s.step_time_us)
    return float(np.mean(list(by_step.values())))


def changes_for(path: Path) -> list[str]:
    """One fuse= change per (mode, chunks) of the run's manifest, naming its layers."""
    doc = json.loads(manifest_path(path).read_text())
    by: dict[tuple, list[str]] = {}
    for layer, v in doc["fusion_by_layer"].items():
        if v["mode"] != "none":
            by.setdefault((v["mode"], v["chunks"]), []).append(layer)
    return [f"fuse={m}:{c}@{','.join(layers)}" for (m, c), layers in by.items()]


def contention_for(regime: str, mode: str, protocol: str):
    """(contention tuple for `predict`, extra GEMM samples, the run it came from or None)."""
    base = inputs(run_dir(regime, "none"))
    if protocol == "assumed":
        return None, None, None
    others = [m for m in TARGETS[regime] if m != mode] if protocol == "loo" else [mode]
    target_kind = transfer_kind(inputs(run_dir(regime, mode)))
    same = [m for m in others if transfer_kind(inputs(run_dir(regime, m))) == target_kind]
    if not same:
        return None, None, None
    src = inputs(run_dir(regime, same[0]))
    source = contention_source(src, base, f"h200x2-{regime}-{same[0]}")
    return source, src.samples, same[0]


@cache
def measured_pairs_us(path: Path) -> dict[str, float]:
    """Per pair `layer/op` of the fused run: the mean GPU span of its `tpscope/<layer>/<op>`
    range (its activities' latest end less their earliest start, those launched inside it) over
    ranks and steps. A backward range (`<layer>.bwd`) also holds the weight gradient's GEMM."""
    run = load_run(path, workers=1)
    spans: dict[str, list[float]] = {}
    for r in run.ranks:
        a, sym, g = r.annotations, r.symbols, r.gpu
        ids = {
            i: s.removeprefix(LAYER_PREFIX)
            for i, s in enumerate(sym)
            if s.startswith(LAYER_PREFIX) and s.count("/") == 2
        }
        keep = np.flatnonzero(np.isin(a.name_id, list(ids)) & ~a.on_gpu)
        for k in keep.tolist():
            inside = (
                (g.launch_tid == a.tid[k])
                & (g.launch_start_ns >= a.start_ns[k])
                & (g.launch_start_ns <= a.end_ns[k])
            )
            if inside.any():
                span = float(g.end_ns[inside].max() - g.start_ns[inside].min()) / 1000.0
                spans.setdefault(ids[int(a.name_id[k])], []).append(span)
    return {k: float(np.mean(v)) for k, v in spans.items()}


def pair_error_us(pred, measured: dict[str, float], backward: bool) -> float:
    """The pipelines' error per step, Σ over the forward (or backward) pairs of predicted less
    measured. A backward pair's prediction is its pipeline plus what of its weight gradient runs
    after it, as its range holds the weight gradient."""
    total = 0.0
    for used in pred.fused.values():
        after = used["wgrad_after_us_by_pair"]
        for name, us in used["pipeline_us_by_pair"].items():
            if name in measured and (".bwd/" in name) == backward:
                total += us + (after.get(name, 0.0) if backward else 0.0) - measured[name]
    return total


def fused_rows(protocol: str) -> list[dict]:
    rows = []
    for regime, modes in TARGETS.items():
        base_dir = run_dir(regime, "none")
        base = inputs(base_dir)
        for mode in modes:
            target = run_dir(regime, mode)
            contention, extra, src = contention_for(regime, mode, protocol)
            texts = changes_for(target)
            w = predict(base, [parse_change(t) for t in texts], contention, None, extra)
            pred = w.changes[-1]
            measured = measured_step_us(target)
            spans = measured_pairs_us(target)
            rows.append(
                {
                    "regime": regime,
                    "mode": mode,
                    "contention_from": src,
                    "slowdown": contention.slowdown if contention else None,
                    "slowdown_by_beside": contention.by_beside if contention else {},
                    "unfused_us": measured_step_us(base_dir),
                    "measured_us": measured,
                    "predicted_us": pred.predicted_step_us,
                    "error": (pred.predicted_step_us - measured) / measured,
                    "forward_pairs_error_us": pair_error_us(pred, spans, backward=False),
                    "backward_pairs_error_us": pair_error_us(pred, spans, backward=True),
                    "changes": texts,
                }
            )
    return rows


def order_ok(rows: list[dict], regime: str) -> bool:
    """Whether the predicted step times rank the regime's modes as the measured ones do."""
    mine = [r for r in rows if r["regime"] == regime]
    by_meas = [r["mode"] for r in sorted(mine, key=lambda r: r["measured_us"])]
    by_pred = [r["mode"] for r in sorted(mine, key=lambda r: r["predicted_us"])]
    return by_meas == by_pred


SHM_LINK_FROM = "shm-chunked"  # a fused shm run: the shm link's α-β fit, measured on its own trace


def link_row() -> dict:
    """shm-none predicted from nvlink-none: every collective kind at the shm link's α-β fit."""
    src = inputs(run_dir("shm", "chunked"))
    texts = [f"link={f.beta_gbps:.2f},{f.alpha_us:.2f}@{k}" for k, f in sorted(src.fits.items())]
    base_dir, target = run_dir("nvlink", "none"), run_dir("shm", "none")
    w = predict(inputs(base_dir), [parse_change(t) for t in texts])
    pred = w.changes[-1].predicted_step_us
    measured = measured_step_us(target)
    comp_base = _compute_on_path(base_dir)
    comp_target = _compute_on_path(target)
    return {
        "changes": texts,
        "measured_us": measured,
        "predicted_us": pred,
        "error": (pred - measured) / measured,
        "compute_path_base_us": comp_base,
        "compute_path_target_us": comp_target,
    }


def _compute_on_path(path: Path) -> float:
    paths = analyze_run(load_run(path, workers=1)).critical_path
    return float(np.mean([p.compute_us for p in paths if not p.first_step]))


def _slowdowns(r: dict) -> str:
    """The contention source's slowdown beside each kind of transfer (overall where it has one
    kind), or the assumption."""
    by = r["slowdown_by_beside"]
    if r["slowdown"] is None:
        return "10% / 3% (assumed)"
    if len(by) < 2:
        return f"{100 * r['slowdown']:.1f}%"
    return ", ".join(
        f"{100 * v:.1f}% ({'send/recv' if k == 'p2p' else 'coll.'})" for k, v in by.items()
    )


def markdown() -> str:
    out = []
    for protocol in ("loo", "assumed", "own"):
        rows = fused_rows(protocol)
        out.append(f"\n{protocol}:\n")
        out.append(
            "| regime | fused run | contention from | slowdown | unfused ms | measured ms | "
            "predicted ms | error | forward pipelines ms | backward pipelines ms | the rest ms |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            fwd, bwd = r["forward_pairs_error_us"], r["backward_pairs_error_us"]
            rest = r["predicted_us"] - r["measured_us"] - fwd - bwd
            out.append(
                f"| {r['regime']} | {r['mode']} | {r['contention_from'] or 'assumed'} | "
                f"{_slowdowns(r)} | "
                f"{r['unfused_us'] / 1000:.2f} | {r['measured_us'] / 1000:.2f} | "
                f"{r['predicted_us'] / 1000:.2f} | {100 * r['error']:+.2f}% | "
                f"{fwd / 1000:+.2f} | {bwd / 1000:+.2f} | {rest / 1000:+.2f} |"
            )
        mean = float(np.mean([abs(r["error"]) for r in rows]))
        order = {g: order_ok(rows, g) for g in TARGETS}
        out.append(f"\nmean |error| {100 * mean:.2f}%; measured order kept: {order}")
    r = link_row()
    out.append(
        f"\nshm-none from nvlink-none ({' '.join(r['changes'])}): measured "
        f"{r['measured_us'] / 1000:.2f} ms, predicted {r['predicted_us'] / 1000:.2f} ms, error "
        f"{100 * r['error']:+.2f}%; compute on the path {r['compute_path_base_us'] / 1000:.2f} ms "
        f"(nvlink-none) vs {r['compute_path_target_us'] / 1000:.2f} ms (shm-none)"
    )
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
