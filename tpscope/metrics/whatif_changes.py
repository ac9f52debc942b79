"""What-if changes: each one a model that rewrites the replay's durations (metrics.md §11).

`comm=FACTOR[@GROUP|KIND]` scales transfers; `link=GBPS[,LAT_US][@GROUP|KIND]` times them by an
α-β model with §5's bus-bandwidth rule; `hide=all|GROUP|KIND` sets them to zero (the upper bound);
`fuse=MODE[:CHUNKS][:no-bwd][@LAYERS]` replaces each AG-GEMM / GEMM-RS pair by its chunk pipeline;
`contention=off` runs every GEMM that overlapped communication at its isolated time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tpscope.metrics.collectives import CollectiveMatch, busbw_factor, collective_kind
from tpscope.metrics.gemm import Gemms, Samples, baselines, isolated_samples
from tpscope.metrics.replay import ReplayGraph
from tpscope.trace import ActivityClass

KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast", "send_recv")
FUSE_MODES = ("chunked", "ring", "copy_engine", "host_staged")
# modes whose transfers run on SMs beside the GEMM (the rest use copy engines: no SM tax)
SM_MODES = ("chunked", "ring")
ASSUMED_SLOWDOWN = {"sm": 0.10, "copy": 0.03}  # metrics.md §11: used only without a measurement
DEFAULT_CHUNKS = 4
NO_BWD = "no-bwd"  # fuse=MODE[:CHUNKS]:no-bwd: the runtime's FusionChoice without backward overlap


class ChangeError(ValueError):
    """A CHANGE the user typed that cannot be parsed or applied; the message names it."""


@dataclass(frozen=True, slots=True)
class Change:
    text: str  # as typed
    kind: str  # comm, link, hide, fuse, contention
    factor: float = 1.0
    gbps: float | None = None
    lat_us: float | None = None
    target: str | None = None  # @GROUP or @KIND (fuse: @LAYERS)
    mode: str | None = None
    chunks: int = DEFAULT_CHUNKS
    bwd_overlap: bool = True  # fuse=: the backward's weight gradient beside its transfers


_NUM = r"[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?"


def parse_change(text: str) -> Change:
    """One CHANGE as typed; raises ChangeError naming it."""
    key, sep, value = text.partition("=")
    value, at, target = value.partition("@")
    bad = ChangeError(f"CHANGE {text!r}: {_USAGE.get(key, 'unknown change; ' + _ALL)}")
    target = target.strip() or None
    if not sep or (at and target is None):
        raise bad
    if key == "comm":
        if not re.fullmatch(_NUM, value) or not 0 <= float(value) < np.inf:
            raise bad
        return Change(text, "comm", factor=float(value), target=target)
    if key == "link":
        parts = value.split(",")
        if not 1 <= len(parts) <= 2 or not all(re.fullmatch(_NUM, p) for p in parts):
            raise bad
        if float(parts[0]) <= 0 or not all(np.isfinite(float(p)) for p in parts):
            raise bad
        lat = float(parts[1]) if len(parts) == 2 else None
        return Change(text, "link", gbps=float(parts[0]), lat_us=lat, target=target)
    if key == "hide":
        if not value or (value == "all" and target):
            raise bad
        return Change(text, "hide", target=None if value == "all" else value)
    if key == "fuse":
        mode, *opts = value.split(":")
        no_bwd = bool(opts) and opts[-1] == NO_BWD
        chunks = opts[0] if opts and opts[0] != NO_BWD else ""
        if (
            mode not in FUSE_MODES
            or len(opts) > (1 if chunks else 0) + no_bwd
            or (chunks and (not chunks.isdigit() or int(chunks) < 1))
        ):
            raise bad
        return Change(
            text,
            "fuse",
            mode=mode,
            chunks=int(chunks) if chunks else DEFAULT_CHUNKS,
            target=target,
            bwd_overlap=not no_bwd,
        )
    if key == "contention":
        if value != "off" or target:
            raise bad
        return Change(text, "contention")
    raise bad


_ALL = "one of comm=FACTOR[@GROUP|KIND], link=GBPS[,LAT_US][@GROUP|KIND], hide=all|GROUP|KIND, fuse=MODE[:CHUNKS][:no-bwd][@LAYERS], contention=off"
_USAGE = {
    "comm": "expected comm=FACTOR[@GROUP|KIND], FACTOR >= 0",
    "link": "expected link=GBPS[,LAT_US][@GROUP|KIND], GBPS > 0 and LAT_US >= 0 (numbers)",
    "hide": "expected hide=all|GROUP|KIND (no @)",
    "fuse": f"expected fuse=MODE[:CHUNKS][:no-bwd][@LAYERS], MODE one of {', '.join(FUSE_MODES)}, "
    "CHUNKS a whole number >= 1",
    "contention": "expected contention=off",
}


@dataclass(frozen=True, slots=True)
class Comm:
    """The comm activities of a run as the changes see them: per row its kind and group label;
    per instance its bytes, kind, group and busbw factor."""

    row_kind: np.ndarray  # object: per RunActivities row, kind or "" (non-comm: "")
    row_group: np.ndarray  # object: group label or ""
    inst_kind: list
    inst_group: list
    inst_bytes: np.ndarray
    inst_factor: np.ndarray  # busbw factor (nan where unknown)


def comm_table(acts, match: CollectiveMatch) -> Comm:
    names = np.array(acts.strings + ("",), dtype=object)
    coll = names[np.where(acts.coll >= 0, acts.coll, len(acts.strings))]
    name = names[np.where(acts.name >= 0, acts.name, len(acts.strings))]
    kinds = {s: collective_kind(s) or "" for s in set(coll.tolist()) | set(name.tolist())}
    row_kind = np.array(
        [kinds[c] or kinds[n] for c, n in zip(coll.tolist(), name.tolist())], object
    )
    row_kind[acts.cls != ActivityClass.COMM] = ""
    row_kind[(acts.cls == ActivityClass.COMM) & (acts.p2p >= 0)] = "send_recv"
    groups = np.array(acts.strings + ("",), dtype=object)
    row_group = groups[np.where(acts.group >= 0, acts.group, len(acts.strings))]
    inst_kind = [collective_kind(c) or "" for c in match.collective]
    inst_group = list(match.group) if match.group else [""] * match.n_instances
    # a matched row's label is its instance's (§5: "pg [ranks] description"), which names the
    # group where the row's own label has only its id and ranks
    inst = np.asarray(match.instance)
    labelled = np.flatnonzero(inst >= 0)
    if len(labelled) and match.group:
        own = np.array(inst_group, dtype=object)[inst[labelled]]
        row_group[labelled] = np.where(own != "", own, row_group[labelled])
    factor = np.array(
        [busbw_factor(k or None, int(n)) or np.nan for k, n in zip(inst_kind, match.group_size)]
    )
    return Comm(row_kind, row_group, inst_kind, inst_group, np.asarray(match.bytes), factor)


def select_rows(comm: Comm, is_comm: np.ndarray, target: str | None, spec: str) -> np.ndarray:
    """Comm rows a change applies to: all, or those of any of the comma-separated targets, each a
    collective kind or a text a group's label holds (any case). Raises ChangeError naming a
    target that selects nothing."""
    if target is None:
        sel = is_comm.copy()
        if not sel.any():
            raise ChangeError(f"CHANGE {spec!r}: no communication of any kind in this run")
        return sel
    sel = np.zeros(len(is_comm), bool)
    labels = comm.row_group.tolist()
    for part in re.split(r",(?![^\[]*\])", target):  # commas outside a label's [ranks]
        if part in KINDS:
            one = is_comm & (comm.row_kind == part)
        else:
            holds = {g: label_holds(g, part) for g in set(labels)}  # per distinct label
            one = is_comm & np.array([holds[g] for g in labels], bool)
        if not one.any():
            raise ChangeError(f"CHANGE {spec!r}: no communication of {part} in this run")
        sel |= one
    return sel


_LABEL = re.compile(r"^(\S+)(?: (\[[^\]]*\]))?(?: (.*))?$")


def label_holds(label: str, target: str) -> bool:
    """Whether a §5 group label ("pg [ranks] description") is selected by `target`: its pg name
    or its ranks exactly, the whole label, or a text of its description, in any case (`1` is pg
    1, not every group with rank 1)."""
    m = _LABEL.match(label)
    if not label or m is None:
        return False
    name, ranks, desc = m.group(1), m.group(2) or "", m.group(3) or ""
    t = target.lower()
    return t in (name.lower(), ranks.lower(), label.lower()) or (bool(desc) and t in desc.lower())


@dataclass(frozen=True, slots=True)
class AlphaBeta:
    """transfer = α + bytes·f / β per collective kind (metrics.md §5's bus bandwidth)."""

    kind: str
    alpha_us: float
    beta_gbps: float
    n: int
    residual: float  # RMS of (fit - measured) / measured


def fit_alpha_beta(comm: Comm, transfer_span_ns: np.ndarray) -> dict[str, AlphaBeta]:
    """Least squares of each kind's instance transfers on bytes·f (bytes with a known dtype)."""
    out = {}
    kinds = np.array(comm.inst_kind, dtype=object)
    x_all = comm.inst_bytes * comm.inst_factor
    for kind in sorted(set(comm.inst_kind) - {""}):
        sel = (kinds == kind) & np.isfinite(x_all) & (comm.inst_bytes > 0) & (transfer_span_ns > 0)
        x, y = x_all[sel], transfer_span_ns[sel].astype(float)
        if len(x) < 2:
            continue
        if np.ptp(x) > 0:
            slope, alpha = np.polyfit(x, y, 1)
        else:
            slope, alpha = float(np.median(y) / x[0]), 0.0
        if slope <= 0 or alpha < 0:  # through the origin: one bandwidth, no latency
            slope, alpha = float(np.sum(x * y) / np.sum(x * x)), 0.0
        resid = float(np.sqrt(np.mean(((alpha + slope * x) - y) ** 2 / y**2)))
        out[kind] = AlphaBeta(kind, alpha / 1000.0, 1.0 / slope, int(len(x)), resid)
    return out


def link_time_ns(nbytes: np.ndarray, factor: np.ndarray, gbps: float, lat_us: float) -> np.ndarray:
    """α-β: lat + bytes·f / bandwidth (bytes per ns = GB/s)."""
    return lat_us * 1000.0 + nbytes * factor / gbps


@dataclass
class Durations:
    """The durations a replay uses, rewritten change by change."""

    dur_ns: np.ndarray
    transfer_ns: np.ndarray
    notes: list
    fused: dict = field(default_factory=dict)  # per change text: the pipelines' inputs (fuse=)
    scale: np.ndarray | None = None  # per row: what comm= and hide= multiplied its transfer by


def apply_comm(d: Durations, rg: ReplayGraph, sel: np.ndarray, factor: float) -> None:
    """comm=: matched transfers and unmatched comm kernels of `sel` scaled (metrics.md §11)."""
    matched = sel & (rg.instance >= 0)
    d.transfer_ns[matched] = (d.transfer_ns[matched] * factor).astype(np.int64)
    if d.scale is None:
        d.scale = np.ones(len(rg.dur_ns))
    d.scale[sel] *= factor
    loose = sel & (rg.instance < 0)
    d.dur_ns[loose] = (d.dur_ns[loose] * factor).astype(np.int64)


def apply_link(
    d: Durations,
    rg: ReplayGraph,
    comm: Comm,
    sel: np.ndarray,
    gbps: float,
    lat_us: float | None,
    fits: dict[str, AlphaBeta],
) -> None:
    """link=: each selected matched collective timed lat + bytes·f / GBPS; LAT_US defaults to the
    run's fitted α of its kind. Collectives without bytes keep their time (noted)."""
    rows = np.flatnonzero(sel & (rg.instance >= 0))
    inst = rg.instance[rows]
    nbytes, factor = comm.inst_bytes[inst].astype(float), comm.inst_factor[inst]
    known = (nbytes > 0) & np.isfinite(factor)
    kinds = np.array(comm.inst_kind, dtype=object)[inst]
    lat = np.array(
        [lat_us if lat_us is not None else (fits[k].alpha_us if k in fits else 0.0) for k in kinds]
    )
    t = lat * 1000.0 + np.where(known, nbytes * np.nan_to_num(factor), 0) / gbps
    d.transfer_ns[rows[known]] = t[known].astype(np.int64)
    if (~known).any():
        d.notes.append(f"{int((~known).sum())} collective kernels without bytes keep their time")
    loose = int((sel & (rg.instance < 0)).sum())
    if loose:
        d.notes.append(f"{loose} unmatched comm kernels (no bytes) keep their time")


def gemm_baselines_ns(gemms: Gemms, pools: list[Samples]) -> np.ndarray:
    """Per GEMM shape id: the isolated baseline by §8's rules (nan where none)."""
    found = baselines(gemms.shapes, pools)
    return np.array([b.full_ns if b is not None else np.nan for b in found])


def run_samples(gemms: Gemms, dur_ns: np.ndarray, f: np.ndarray) -> Samples:
    """The run's isolated GEMM samples (§8: f == 0)."""
    rows = gemms.act
    return isolated_samples(gemms, dur_ns[rows], f[rows] == 0)


def apply_contention_off(
    d: Durations, gemms: Gemms, f: np.ndarray, base_ns: np.ndarray
) -> tuple[int, float]:
    """contention=off: every GEMM that overlapped communication (f >= 0.5, §8) with a baseline
    runs at it. (GEMMs changed, µs removed.)"""
    rows = gemms.act
    b = base_ns[gemms.shape]
    hit = (f[rows] >= 0.5) & np.isfinite(b)
    r = rows[hit]
    new = np.minimum(d.dur_ns[r], b[hit].astype(np.int64))
    removed = float((d.dur_ns[r] - new).sum()) / 1000.0
    d.dur_ns[r] = new
    return int(hit.sum()), removed


__all__ = [
    "AlphaBeta",
    "Change",
    "ChangeError",
    "Comm",
    "Durations",
    "apply_comm",
    "apply_contention_off",
    "apply_link",
    "comm_table",
    "fit_alpha_beta",
    "parse_change",
    "label_holds",
    "select_rows",
]
