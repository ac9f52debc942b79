"""Test run folders built from the real H200 runs in tests/data: copies, stretched copies, manifests."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
UNFUSED = DATA / "h200-nvlink-unfused"  # baseline-like: plain AG then GEMM, GEMM then RS
CHUNKED = DATA / "h200-shm-chunked4"  # another regime (shm) and mode (4 chunks): much slower steps
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def real_unfused() -> Path:
    """The bundled unfused NVLink sample run (traces and manifest), else the corpus copy (traces only)."""
    sample = SAMPLES / "h200x2-nvlink-none"
    return sample if (sample / "tpscope_run.jsonc").is_file() else UNFUSED


def _events_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.name.endswith((".json", ".json.gz")) and p.name != "tpscope_run.jsonc"
    )


def _read(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)


def stretched_copy(src: Path, dst: Path, factor: float) -> Path:
    """A copy of run `src` whose timeline is stretched by `factor` about the run's first event:
    every step (and every kernel in it) lasts `factor` times as long; names and args stay real."""
    dst.mkdir(parents=True)
    docs = {p: _read(p) for p in _events_files(src)}
    # absolute µs of the earliest event over all ranks: ranks stay aligned with each other
    t0_abs = min(
        d.get("baseTimeNanoseconds", 0) / 1000 + min(e["ts"] for e in d["traceEvents"] if "ts" in e)
        for d in docs.values()
    )
    for path, doc in docs.items():
        t0 = t0_abs - doc.get("baseTimeNanoseconds", 0) / 1000  # in this file's own time base
        for e in doc["traceEvents"]:
            if "ts" in e:
                e["ts"] = t0 + (float(e["ts"]) - t0) * factor
            if "dur" in e:
                e["dur"] = float(e["dur"]) * factor
        data = json.dumps(doc).encode()
        (dst / path.name).write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    manifest = src / "tpscope_run.jsonc"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        if m.get("step_times_ms"):
            m["step_times_ms"] = [t * factor for t in m["step_times_ms"]]
        if m.get("tokens_per_s"):
            m["tokens_per_s"] = m["tokens_per_s"] / factor
        (dst / "tpscope_run.jsonc").write_text(json.dumps(m))
    return dst


def copy_run(src: Path, dst: Path, manifest: dict | None = None) -> Path:
    """A copy of run `src`, with `manifest` written as its tpscope_run.jsonc when given."""
    shutil.copytree(src, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    if manifest is not None:
        (dst / "tpscope_run.jsonc").write_text(json.dumps(manifest))
    return dst


def manifest(
    step_times_ms: list[float],
    peak_memory_bytes: int | None,
    tokens_per_step: int = 4096,
    timed_steps: list[int] | None = None,
) -> dict:
    """The fields of tpscope_run.jsonc that a report reads (tpscope.runfolder.manifest.Manifest's fields)."""
    timed = timed_steps if timed_steps is not None else list(range(1, len(step_times_ms)))
    return {
        "schema_version": 1,
        "regime": "nvlink",
        "mode": "none",
        "chunks": 1,
        "tp": 2,
        "tokens_per_step": tokens_per_step,
        "step_times_ms": step_times_ms,
        "timed_steps": timed,
        "tokens_per_s": None,
        "peak_memory_bytes": peak_memory_bytes,
    }
