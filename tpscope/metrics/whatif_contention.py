"""What `fuse=` takes from a fused run of the same regime (`--contention-from`): the GEMM slowdown
beside communication, by the kind of transfer beside the GEMMs and per GEMM shape, and the run's
α-β fit for the chunk transfers (metrics.md §11)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tpscope.metrics.contention import comm_overlap_fraction
from tpscope.metrics.whatif_changes import SM_MODES, gemm_baselines_ns

if TYPE_CHECKING:
    from tpscope.metrics.whatif import Inputs


@dataclass(frozen=True, slots=True)
class ContentionSource:
    """What `fuse=` takes from a fused run of the same regime (`--contention-from`)."""

    slowdown: float  # measured_contention
    source: str  # what it was measured on
    transfers: str  # "sm" or "copy" (transfer_kind): the fuse modes it applies to
    fits: dict = field(default_factory=dict)  # its α-β fit per kind: chunk transfers beside GEMMs
    # the slowdown of its GEMMs beside point-to-point transfers ("p2p": send/recv, a ring's
    # pieces) and beside the others ("coll"), and per (GEMM shape, that kind)
    by_beside: dict = field(default_factory=dict)
    by_shape: dict = field(default_factory=dict)


def transfer_kind(inp: Inputs) -> str:
    """Whether a fused run's transfers take SMs ("sm": NCCL or ring kernels) or copy engines
    ("copy"): by its manifest's modes, else by the share of its comm time in `Memcpy` activities."""
    m = inp.run.manifest
    layers = (m.fusion_by_layer or {}) if m is not None else {}
    modes = [v.get("mode") for v in layers.values() if isinstance(v, dict)]
    modes = [x for x in modes if x and x != "none"]  # each layer's: a count, not a set
    if modes:
        copy = sum(x not in SM_MODES for x in modes)
        return "copy" if copy * 2 > len(modes) else "sm"
    acts = inp.acts
    names = np.array(acts.strings + ("",), dtype=object)
    comm = np.flatnonzero(inp.rg.is_comm)
    dur = (acts.end_ns - acts.start_ns)[comm]
    is_copy = np.array([str(x).startswith("Memcpy") for x in names[acts.name[comm]]], bool)
    return "copy" if dur[is_copy].sum() * 2 > dur.sum() else "sm"


P2P, COLL = "p2p", "coll"
BESIDE_WORDS = {P2P: "beside send/recv", COLL: "beside collectives"}


def _slowdown(dur: np.ndarray, base: np.ndarray) -> float | None:
    """metrics.md §11: Σ(dur − baseline) / Σ baseline."""
    den = float(base.sum())
    return float((dur - base).sum()) / den if den > 0 else None


def _beside_rows(inp: Inputs, reference: Inputs | None):
    """(GEMMs beside comm with a baseline, and per GEMM: duration, baseline, whether most of the
    communication beside it was point-to-point)."""
    pools = [inp.samples, reference.samples if reference is not None else {}]
    base = gemm_baselines_ns(inp.gemms, pools)
    rows = inp.gemms.act
    b = base[inp.gemms.shape]
    f = inp.overlap_f[rows]
    hit = (f >= 0.5) & np.isfinite(b) & (inp.acts.step[rows] >= 0)
    p2p_rows = inp.rg.is_comm & (inp.comm.row_kind == "send_recv")
    f_p2p = comm_overlap_fraction(inp.acts, p2p_rows)[rows] if p2p_rows.any() else 0.0 * f
    dur = (inp.acts.end_ns - inp.acts.start_ns)[rows].astype(float)
    return np.flatnonzero(hit), dur, b, f_p2p * 2 > f


def measured_contention(inp: Inputs, reference: Inputs | None = None) -> float | None:
    """The GEMM slowdown beside communication measured on a (fused) run (`_slowdown`) over its
    GEMMs that overlapped comm (f >= 0.5, §8) and have a §8 baseline (its own isolated samples,
    then `reference`'s)."""
    hit, dur, b, _ = _beside_rows(inp, reference)
    return _slowdown(dur[hit], b[hit]) if len(hit) else None


def contention_source(inp: Inputs, reference: Inputs | None, label: str) -> ContentionSource | None:
    """What `--contention-from` takes from the fused run `inp` (metrics.md §11): its slowdown
    beside communication, overall, by the kind of transfer beside the GEMMs (send/recv or
    collectives) and per GEMM shape and that kind; its α-β fit. None without a GEMM beside comm
    with a baseline."""
    hit, dur, b, p2p = _beside_rows(inp, reference)
    if not len(hit):
        return None
    shapes = inp.gemms.shapes
    sid = inp.gemms.shape
    by_beside, by_shape = {}, {}
    for beside, mask in ((P2P, p2p[hit]), (COLL, ~p2p[hit])):
        rows = hit[mask]
        if len(rows) and (s := _slowdown(dur[rows], b[rows])) is not None:
            by_beside[beside] = s
        for k in np.unique(sid[rows]).tolist():  # a loop over distinct shapes
            one = rows[sid[rows] == k]
            if (s := _slowdown(dur[one], b[one])) is not None:
                by_shape[(shapes[k], beside)] = s
    return ContentionSource(
        _slowdown(dur[hit], b[hit]) or 0.0,
        label,
        transfer_kind(inp),
        inp.fits,
        by_beside,
        by_shape,
    )


__all__ = [
    "BESIDE_WORDS",
    "COLL",
    "P2P",
    "ContentionSource",
    "contention_source",
    "measured_contention",
    "transfer_kind",
]
