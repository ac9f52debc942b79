"""`fuse=MODE[:CHUNKS][:no-bwd][@LAYERS]`: AG-GEMM / GEMM-RS pairs found in any TP run, and the chunk
pipeline that replaces each one in the replay (metrics.md §11).

A pair is an all-gather whose gathered tensor is the next GEMM's input on the same stream (or a
stream that waits for it): the GEMM's M·K equals the all-gather's output elements; or a GEMM whose
output is the next reduce-scatter's input on its stream: M·N equals the reduce-scatter's input
elements. Where our runtime's `tpscope/<layer>/<op>` ranges hold the GEMM, the pair is named by
its layer. A backward pair's weight gradient is the GEMM that follows it on its stream whose
contraction is the pair's GEMM's rows and whose output is the pair's weight (tpscope/fusion/model/
layers.py: `AG(x)^T @ dY`, `Y^T @ AG(dY)`); the modes that overlap the backward run it beside the
pair's transfers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tpscope.metrics.gemm import RULES, GemmShape, baselines
from tpscope.metrics.whatif_changes import SM_MODES, Comm, Durations

AG, RS = "ag_gemm", "gemm_rs"
MAX_BETWEEN = 8  # activities allowed between the collective and its GEMM on the stream
# modes whose backward runs the layer's weight gradient beside its transfers (the runtime's
# bwd_overlap, tpscope/fusion/ops): GEMM-RS after its last GEMM piece, AG-GEMM its own block after
# the own rows' GEMM (the peers' blocks after the pipeline); `ring` computes it after the pipeline
WGRAD_MODES = ("chunked", "copy_engine", "host_staged")


@dataclass(frozen=True, slots=True)
class Pairs:
    """One row per pair occurrence (per rank and step)."""

    kind: np.ndarray  # object: AG or RS
    comm_row: np.ndarray
    gemm_row: np.ndarray
    gemm_id: np.ndarray  # Gemms row
    layer: np.ndarray  # object: layer label or "" (found by pattern)
    wgrad_row: np.ndarray  # the backward's weight-gradient GEMM after the pair (-1: none)
    wgrad_id: np.ndarray  # its Gemms row (-1: none)

    def __len__(self) -> int:
        return len(self.comm_row)


def find_pairs(acts, comm: Comm, gemms, rg) -> Pairs:
    """AG-GEMM and GEMM-RS pairs (module docstring). A loop over collectives of those two kinds,
    each looking at most MAX_BETWEEN activities along its stream."""
    gemm_of_row = np.full(len(acts), -1, np.int64)
    gemm_of_row[gemms.act] = np.arange(len(gemms))
    # each row's successor on its lane
    nxt = np.full(len(acts), -1, np.int64)
    has = rg.stream_pred >= 0
    nxt[rg.stream_pred[has]] = np.flatnonzero(has)
    # waiters: a recorded stream wait's producer -> the activity that waited
    waiter = np.full(len(acts), -1, np.int64)
    ev = rg.event_pred >= 0
    waiter[rg.event_pred[ev]] = np.flatnonzero(ev)
    layers = np.array(gemms.layers + ("",), dtype=object)
    out = {k: [] for k in ("kind", "comm_row", "gemm_row", "gemm_id", "layer", "wgrad_row")}

    def wgrad_after(row: int, s: GemmShape) -> int:
        """The first GEMM within MAX_BETWEEN activities after `row` on its stream, if it is the
        weight gradient of the pair's GEMM `s`: contraction `s.m`, output `s.k` x `s.n`."""
        row, k = int(nxt[row]), 0
        while row >= 0 and k < MAX_BETWEEN and gemm_of_row[row] < 0:
            row, k = int(nxt[row]), k + 1
        if row < 0 or gemm_of_row[row] < 0:
            return -1
        w = gemms.shapes[gemms.shape[gemm_of_row[row]]]
        ok = w.batch == s.batch and w.k == s.m and sorted((w.m, w.n)) == sorted((s.k, s.n))
        return row if ok else -1

    def add(kind, c, row):
        gid = int(gemm_of_row[row])
        lid = gemms.layer[gid]
        s = gemms.shapes[gemms.shape[gid]]
        out["kind"].append(kind)
        out["comm_row"].append(c)
        out["gemm_row"].append(row)
        out["gemm_id"].append(gid)
        out["layer"].append(str(layers[lid]).split("/")[0] if lid >= 0 else "")
        out["wgrad_row"].append(wgrad_after(row if kind == AG else c, s))

    for c in np.flatnonzero(comm.row_kind == "all_gather").tolist():
        elems = int(acts.out_nelems[c])
        for start in (nxt[c], waiter[c]):
            row, k = int(start), 0
            while row >= 0 and k < MAX_BETWEEN and gemm_of_row[row] < 0:
                row, k = int(nxt[row]), k + 1
            if row >= 0 and gemm_of_row[row] >= 0:
                s = gemms.shapes[gemms.shape[gemm_of_row[row]]]
                if s.batch * s.m * s.k == elems:
                    add(AG, c, row)
                    break
    for c in np.flatnonzero(comm.row_kind == "reduce_scatter").tolist():
        elems = int(acts.in_nelems[c])
        row, k = int(rg.stream_pred[c]), 0
        while row >= 0 and k < MAX_BETWEEN and gemm_of_row[row] < 0:
            row, k = int(rg.stream_pred[row]), k + 1
        if row >= 0 and gemm_of_row[row] >= 0:
            s = gemms.shapes[gemms.shape[gemm_of_row[row]]]
            if s.batch * s.m * s.n == elems:
                add(RS, c, row)
    wrow = np.array(out["wgrad_row"], np.int64)
    return Pairs(
        np.array(out["kind"], dtype=object),
        np.array(out["comm_row"], np.int64),
        np.array(out["gemm_row"], np.int64),
        np.array(out["gemm_id"], np.int64),
        np.array(out["layer"], dtype=object),
        wrow,
        np.where(wrow >= 0, gemm_of_row[np.maximum(wrow, 0)], -1),
    )


def pair_names(p: Pairs, gemms) -> list[str]:
    """Distinct pairs as `layer/op (MxKxN)` (by pattern: `op (MxKxN)`), in first-seen order."""
    seen: dict[str, None] = {}
    for kind, gid, layer in zip(p.kind.tolist(), p.gemm_id.tolist(), p.layer.tolist()):
        s = gemms.shapes[gemms.shape[gid]]
        name = f"{layer + '/' if layer else ''}{kind} ({s.m}x{s.k}x{s.n})"
        seen.setdefault(name, None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class PipelineModel:
    """The inputs of one fuse change's pipelines, each stated (metrics.md §11)."""

    mode: str
    chunks: int
    slowdown: float  # a chunk GEMM's slowdown beside a transfer
    slowdown_source: str
    beta_gbps: dict  # per kind: the link bandwidth its chunk transfers run at
    alpha_us: dict
    bwd_overlap: bool = True  # the weight gradient beside the backward's transfers (WGRAD_MODES)
    slowdown_by_shape: dict = dataclasses.field(default_factory=dict)  # GemmShape -> slowdown

    def slowdown_of(self, shape: GemmShape) -> float:
        """A GEMM's slowdown beside a transfer: measured on its shape, else `slowdown`."""
        return self.slowdown_by_shape.get(shape, self.slowdown)


def pieces_of(kind: str, mode: str, chunks: int, n: int) -> tuple[int, int, float, float]:
    """(pieces, GEMMs per piece, rows share of each of those GEMMs, rows share of the own block)
    of a pair's GEMM, as the runtime issues them (tpscope/fusion/ops): a ring step's chunk is one
    GEMM of a rank's block; a chunk of the other modes one GEMM per peer's block (a chunked
    GEMM-RS's chunk, which holds every rank's rows, one per rank's block, and no own block)."""
    share = 1.0 / (n * chunks)
    if mode == "ring":
        return (n - 1) * chunks, 1, share, 1.0 / n
    if kind == RS and mode == "chunked":
        return chunks, n, share, 0.0
    return chunks, n - 1, share, 1.0 / n


def beside_ns(start_ns: float, work_ns: float, busy_until_ns: float, slowdown: float) -> float:
    """The end of a GEMM of isolated time `work_ns` started at `start_ns`: slowed by `slowdown`
    when a transfer is in flight as it starts (until `busy_until_ns`; metrics.md §11)."""
    return start_ns + work_ns * (1.0 + slowdown if busy_until_ns > start_ns else 1.0)


def pipeline_ns(
    kind: str,
    pieces: int,
    own_ns: float,
    piece_ns: float,
    xfer_ns: float,
    alpha_ns: float,
    slowdown: float,
    wgrad_ns: float = 0.0,
    own_slowdown: float | None = None,
    wgrad_slowdown: float | None = None,
) -> float:
    """The makespan in ns of one pair's chunk pipeline, from the moment every rank has arrived
    (metrics.md §11).

    AG-GEMM: the own block's GEMM runs first (then `wgrad_ns`, the own block of a backward's
    weight gradient), beside the first transfers; the peers' rows arrive in `pieces` transfers
    back to back, each α + (transfer − α)/pieces; each piece's GEMM starts when its piece has
    landed and the previous GEMM is done. GEMM-RS: the pieces' GEMMs first, each piece's transfer
    after its GEMM and the previous transfer, then the own block (none in chunked mode, whose
    pieces hold every rank's rows), then `wgrad_ns` (a backward's weight gradient), beside the
    last transfers. A GEMM that starts while a transfer is in flight is slowed by `slowdown`
    (beside_ns); the own block and the weight gradient by theirs where given."""
    t_piece = alpha_ns + max(xfer_ns - alpha_ns, 0.0) / pieces
    own_slow = slowdown if own_slowdown is None else own_slowdown
    wgrad_slow = slowdown if wgrad_slowdown is None else wgrad_slowdown
    if kind == AG:
        last_landed = t_piece * pieces
        t = beside_ns(0.0, own_ns, last_landed, own_slow)
        t = beside_ns(t, wgrad_ns, last_landed, wgrad_slow)
        for j in range(pieces):
            t = max(t, t_piece * (j + 1))
            t = beside_ns(t, piece_ns, last_landed, slowdown)
        return t
    t_gemm, t_comm = 0.0, 0.0
    for _j in range(pieces):
        t_gemm = beside_ns(t_gemm, piece_ns, t_comm, slowdown)
        t_comm = max(t_comm, t_gemm) + t_piece
    t_gemm = beside_ns(t_gemm, own_ns, t_comm, own_slow)
    t_gemm = beside_ns(t_gemm, wgrad_ns, t_comm, wgrad_slow)
    return max(t_gemm, t_comm)


def _part(shape: GemmShape, dim: str, share: float) -> GemmShape:
    """The shape of `share` of a GEMM's `dim`, rounded to whole rows."""
    return dataclasses.replace(shape, **{dim: max(1, int(round(getattr(shape, dim) * share)))})


class GemmTimes:
    """Isolated GEMM times by shape (metrics.md §8's baselines over the given pools), for the
    whole GEMM and its row pieces; where no baseline exists, the GEMM's own measured time, and a
    piece that share of it (linear in M: stated as assumed)."""

    def __init__(self, pools: list) -> None:
        self.pools = pools
        self.cache: dict = {}
        self.rules: dict[str, int] = {}

    def ns(self, shape: GemmShape, share: float, own_ns: float, dim: str = "m") -> float:
        """The time of `share` of the GEMM's `dim` (rows `m`, or the contraction `k` of a weight
        gradient's block)."""
        whole = getattr(shape, dim)
        want = _part(shape, dim, share)
        rows = getattr(want, dim)
        key = (shape, dim, rows)
        if key not in self.cache:
            b = baselines((want,), self.pools)[0]
            if b is not None:
                source = b.source.replace("reference", "the --contention-from run")
                self.cache[key] = (b.full_ns, RULES[b.rule] + f" ({source})")
            else:
                self.cache[key] = (None, f"linear in {dim.upper()} from the whole GEMM (assumed)")
        value, rule = self.cache[key]
        self.rules[rule] = self.rules.get(rule, 0) + 1
        return value if value is not None else own_ns * rows / whole


def apply_fuse(
    d: Durations,
    rg,
    pairs: Pairs,
    model: PipelineModel,
    group_size: np.ndarray,
    comm: Comm,
    times: GemmTimes,
    gemms,
) -> dict:
    """Each pair's collective's transfer set to 0 (its arrival stays: the ranks still meet) and
    its GEMM's time set to the pipeline's makespan. Transfers: the link model of their kind at
    the pair's bytes; GEMMs: `times`. A backward's weight gradient that the mode runs beside the
    transfers (WGRAD_MODES) moves into the pipeline: GEMM-RS all of it, AG-GEMM the own block, the
    peers' blocks staying after it. Returns the inputs used, per pair kind."""
    used = {AG: [], RS: []}
    by_pair: dict[str, list[float]] = {}
    after_by_pair: dict[str, list[float]] = {}
    overlap_wgrad = model.bwd_overlap and model.mode in WGRAD_MODES
    beside = 0  # weight gradients moved into their pipeline
    for kind, c, g, gid, layer, wrow, wid in zip(
        pairs.kind.tolist(),
        pairs.comm_row.tolist(),
        pairs.gemm_row.tolist(),
        pairs.gemm_id.tolist(),
        pairs.layer.tolist(),
        pairs.wgrad_row.tolist(),
        pairs.wgrad_id.tolist(),
    ):
        i = int(rg.instance[c])
        n = int(group_size[i]) if i >= 0 else 2
        ck = "all_gather" if kind == AG else "reduce_scatter"
        nbytes = float(comm.inst_bytes[i]) if i >= 0 else -1.0
        factor = float(comm.inst_factor[i]) if i >= 0 else np.nan
        if model.mode == "ring" and "send_recv" in model.beta_gbps:
            # a ring's pieces are point-to-point: each rank sends bytes·f, and §5 counts a
            # send/recv's bytes over every rank of its ring (factor 1)
            ck, factor = "send_recv", factor * n
        beta = model.beta_gbps.get(ck)
        alpha_ns = model.alpha_us.get(ck, 0.0) * 1000.0
        if beta and nbytes > 0 and np.isfinite(factor):
            xfer = alpha_ns + nbytes * factor / beta
        else:
            xfer = float(d.transfer_ns[c] if i >= 0 else d.dur_ns[c])
        if d.scale is not None:  # comm= / hide= of the same row scale the pair's transfer too
            xfer *= float(d.scale[c])
            alpha_ns *= float(d.scale[c])
        shape = gemms.shapes[gemms.shape[gid]]
        measured = float(rg.dur_ns[g])
        pieces, per_piece, share, own_share = pieces_of(kind, model.mode, model.chunks, n)
        piece_ns = per_piece * times.ns(shape, share, measured)
        own_ns = times.ns(shape, own_share, measured) if own_share else 0.0
        wgrad_ns, wgrad_slow = 0.0, None
        if overlap_wgrad and wrow >= 0:
            wshape, wmeasured = gemms.shapes[gemms.shape[wid]], float(rg.dur_ns[wrow])
            if kind == RS:
                wgrad_ns, d.dur_ns[wrow] = times.ns(wshape, 1.0, wmeasured), 0
            else:  # the own block's contraction beside the transfers, the peers' after
                wgrad_ns = times.ns(wshape, 1.0 / n, wmeasured, dim="k")
                d.dur_ns[wrow] = int(wgrad_ns * (n - 1))
                wshape = _part(wshape, "k", 1.0 / n)
            wgrad_slow = model.slowdown_of(wshape)
            beside += 1
        span = pipeline_ns(
            kind,
            pieces,
            own_ns,
            piece_ns,
            xfer,
            alpha_ns,
            model.slowdown_of(_part(shape, "m", share)),
            wgrad_ns,
            model.slowdown_of(_part(shape, "m", own_share)),
            wgrad_slow,
        )
        if i >= 0:
            d.transfer_ns[c] = 0
        else:
            d.dur_ns[c] = 0
        d.dur_ns[g] = int(span)
        used[kind].append((xfer, measured, span, pieces))
        name = f"{layer}/{kind}" if layer else kind
        by_pair.setdefault(name, []).append(span / 1000.0)
        if wrow >= 0:  # what of the weight gradient runs after the pipeline
            after_by_pair.setdefault(name, []).append(float(d.dur_ns[wrow]) / 1000.0)
    out = {
        k: {
            "pairs": len(v),
            "transfer_us": float(np.mean([x[0] for x in v])) / 1000 if v else None,
            "gemm_us": float(np.mean([x[1] for x in v])) / 1000 if v else None,
            "pipeline_us": float(np.mean([x[2] for x in v])) / 1000 if v else None,
            "pieces": v[0][3] if v else None,
        }
        for k, v in used.items()
    }
    out["pipeline_us_by_pair"] = {k: float(np.mean(v)) for k, v in by_pair.items()}
    out["wgrad_after_us_by_pair"] = {k: float(np.mean(v)) for k, v in after_by_pair.items()}
    out["wgrad_beside"] = beside
    return out


def is_sm_mode(mode: str) -> bool:
    return mode in SM_MODES


def selected_pairs(pairs: Pairs, target: str | None) -> np.ndarray:
    """Which pairs a fuse= change selects: all, or those whose layer is one of `@LAYERS` (comma
    separated) or starts with one of them."""
    layers = pairs.layer.tolist()
    if not target:
        return np.ones(len(layers), bool)
    wanted = set(target.split(","))
    return np.array(
        [lay in wanted or any(lay.startswith(w) for w in wanted) for lay in layers], bool
    )


def no_pair_reason(pairs: Pairs, manifest, target: str | None) -> str:
    """Why a fuse= change selects no pair, in one line: no layer of `@LAYERS`, a run its manifest
    (§9) records as fused, or no collective and GEMM of the pattern."""
    if target and len(pairs):
        found = sorted(set(pairs.layer.tolist()) - {""})
        shown = ", ".join(found[:8]) + (f", ... ({len(found)} layers)" if len(found) > 8 else "")
        return (
            f"no AG-GEMM or GEMM-RS pair of the layers {target} in this run (the pairs found: "
            f"{shown or 'found by pattern, without a layer name'})"
        )
    layers = (manifest.fusion_by_layer or {}) if manifest is not None else {}
    modes = sorted(
        {v.get("mode") for v in layers.values() if isinstance(v, dict)} - {None, "", "none"}
    )
    if modes:
        return (
            "no AG-GEMM or GEMM-RS pair found in this run: it is fused already (its manifest's "
            f"modes: {', '.join(modes)}); predict from its unfused run"
        )
    return (
        "no AG-GEMM or GEMM-RS pair found in this run (an all-gather whose whole output is the "
        "next GEMM's input, or a GEMM whose whole output is the next reduce-scatter's input; a "
        "run fused already has none: its collectives move chunks)"
    )


def overridden(pairs: Pairs, fuses: list[tuple[str, str | None]]) -> list[str]:
    """Notes for a row with several fuse= changes ((text, @LAYERS) in the order applied): the
    pairs a later one takes over from an earlier one (a pair gets the last one's pipeline)."""
    notes = []
    for i, (text, target) in enumerate(fuses):
        mine = selected_pairs(pairs, target)
        later = np.zeros_like(mine)
        for _t, other in fuses[i + 1 :]:
            later |= selected_pairs(pairs, other)
        n = int((mine & later).sum())
        if n:
            notes.append(f"{text}: {n} of its {int(mine.sum())} pairs fused by a later fuse=")
    return notes


__all__ = [
    "AG",
    "RS",
    "Pairs",
    "PipelineModel",
    "apply_fuse",
    "beside_ns",
    "find_pairs",
    "no_pair_reason",
    "overridden",
    "pair_names",
    "pipeline_ns",
    "selected_pairs",
]
