"""`fuse=MODE[:CHUNKS][@LAYERS]`: AG-GEMM / GEMM-RS pairs found in any TP run, and the chunk
pipeline that replaces each one in the replay (metrics.md §11).

A pair is an all-gather whose gathered tensor is the next GEMM's input on the same stream (or a
stream that waits for it): the GEMM's M·K equals the all-gather's output elements; or a GEMM whose
output is the next reduce-scatter's input on its stream: M·N equals the reduce-scatter's input
elements. Where our runtime's `tpscope/<layer>/<op>` ranges hold the GEMM, the pair is named by
its layer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tpscope.metrics.gemm import RULES, GemmShape, baselines
from tpscope.metrics.whatif_changes import SM_MODES, Comm, Durations

AG, RS = "ag_gemm", "gemm_rs"
MAX_BETWEEN = 8  # activities allowed between the collective and its GEMM on the stream


@dataclass(frozen=True, slots=True)
class Pairs:
    """One row per pair occurrence (per rank and step)."""

    kind: np.ndarray  # object: AG or RS
    comm_row: np.ndarray
    gemm_row: np.ndarray
    gemm_id: np.ndarray  # Gemms row
    layer: np.ndarray  # object: layer label or "" (found by pattern)

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
    out = {k: [] for k in ("kind", "comm_row", "gemm_row", "gemm_id", "layer")}

    def add(kind, c, row):
        gid = int(gemm_of_row[row])
        lid = gemms.layer[gid]
        out["kind"].append(kind)
        out["comm_row"].append(c)
        out["gemm_row"].append(row)
        out["gemm_id"].append(gid)
        out["layer"].append(str(layers[lid]).split("/")[0] if lid >= 0 else "")

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
    return Pairs(
        np.array(out["kind"], dtype=object),
        np.array(out["comm_row"], np.int64),
        np.array(out["gemm_row"], np.int64),
        np.array(out["gemm_id"], np.int64),
        np.array(out["layer"], dtype=object),
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


def pieces_of(kind: str, mode: str, chunks: int, n: int) -> tuple[int, float, float]:
    """(pieces, rows share of each piece, rows share of the own block) of a pair's GEMM."""
    pieces = (n - 1) * chunks if mode == "ring" else chunks
    if kind == RS and mode == "chunked":  # each chunk's reduce-scatter holds every rank's rows
        return pieces, 1.0 / pieces, 0.0
    return pieces, (n - 1) / n / pieces, 1.0 / n


def pipeline_ns(
    kind: str,
    pieces: int,
    own_ns: float,
    piece_ns: float,
    xfer_ns: float,
    alpha_ns: float,
    slowdown: float,
) -> float:
    """The makespan in ns of one pair's chunk pipeline, from the moment every rank has arrived
    (metrics.md §11).

    AG-GEMM: the own block's GEMM runs first, beside the first transfer; the peers' rows arrive in
    `pieces` transfers back to back, each α + (transfer − α)/pieces; each piece's GEMM starts when
    its piece has landed and the previous GEMM is done. GEMM-RS: the pieces' GEMMs first, each
    piece's transfer after its GEMM and the previous transfer, then the own block (none in
    chunked mode, whose pieces hold every rank's rows) beside the last transfers. A GEMM that runs
    beside a transfer is slowed by `slowdown`."""
    t_piece = alpha_ns + max(xfer_ns - alpha_ns, 0.0) / pieces
    slow = 1.0 + slowdown
    if kind == AG:
        last_landed = t_piece * pieces
        t = own_ns * (slow if last_landed > 0 else 1.0)  # beside the first transfer
        for j in range(pieces):
            t = max(t, t_piece * (j + 1))
            t += piece_ns * (slow if last_landed > t else 1.0)
        return t
    t_gemm, t_comm = 0.0, 0.0
    for _j in range(pieces):
        t_gemm += piece_ns * (slow if t_comm > t_gemm else 1.0)
        t_comm = max(t_comm, t_gemm) + t_piece
    if own_ns:
        t_gemm += own_ns * (slow if t_comm > t_gemm else 1.0)
    return max(t_gemm, t_comm)


class GemmTimes:
    """Isolated GEMM times by shape (metrics.md §8's baselines over the given pools), for the
    whole GEMM and its row pieces; where no baseline exists, the GEMM's own measured time, and a
    piece that share of it (linear in M: stated as assumed)."""

    def __init__(self, pools: list) -> None:
        self.pools = pools
        self.cache: dict = {}
        self.rules: dict[str, int] = {}

    def ns(self, shape: GemmShape, share: float, own_ns: float) -> float:
        rows = max(1, int(round(shape.m * share)))
        key = (shape, rows)
        if key not in self.cache:
            want = dataclasses.replace(shape, m=rows)
            b = baselines((want,), self.pools)[0]
            if b is not None:
                source = b.source.replace("reference", "the --contention-from run")
                self.cache[key] = (b.full_ns, RULES[b.rule] + f" ({source})")
            else:
                self.cache[key] = (None, "linear in M from the whole GEMM (assumed)")
        value, rule = self.cache[key]
        self.rules[rule] = self.rules.get(rule, 0) + 1
        return value if value is not None else own_ns * rows / shape.m


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
    the pair's bytes; GEMMs: `times`. Returns the inputs used, per pair kind."""
    used = {AG: [], RS: []}
    by_pair: dict[str, list[float]] = {}
    for kind, c, g, gid, layer in zip(
        pairs.kind.tolist(),
        pairs.comm_row.tolist(),
        pairs.gemm_row.tolist(),
        pairs.gemm_id.tolist(),
        pairs.layer.tolist(),
    ):
        i = int(rg.instance[c])
        n = int(group_size[i]) if i >= 0 else 2
        ck = "all_gather" if kind == AG else "reduce_scatter"
        if model.mode == "ring" and "send_recv" in model.beta_gbps:
            ck = "send_recv"  # a ring's pieces are point-to-point: bytes·f per rank, as §5's rule
        beta = model.beta_gbps.get(ck)
        alpha_ns = model.alpha_us.get(ck, 0.0) * 1000.0
        nbytes = float(comm.inst_bytes[i]) if i >= 0 else -1.0
        factor = float(comm.inst_factor[i]) if i >= 0 else np.nan
        if beta and nbytes > 0 and np.isfinite(factor):
            xfer = alpha_ns + nbytes * factor / beta
        else:
            xfer = float(d.transfer_ns[c] if i >= 0 else d.dur_ns[c])
        if d.scale is not None:  # comm= / hide= of the same row scale the pair's transfer too
            xfer *= float(d.scale[c])
            alpha_ns *= float(d.scale[c])
        shape = gemms.shapes[gemms.shape[gid]]
        measured = float(rg.dur_ns[g])
        pieces, piece_share, own_share = pieces_of(kind, model.mode, model.chunks, n)
        piece_ns = times.ns(shape, piece_share, measured)
        own_ns = times.ns(shape, own_share, measured) if own_share else 0.0
        span = pipeline_ns(kind, pieces, own_ns, piece_ns, xfer, alpha_ns, model.slowdown)
        if i >= 0:
            d.transfer_ns[c] = 0
        else:
            d.dur_ns[c] = 0
        d.dur_ns[g] = int(span)
        used[kind].append((xfer, measured, span, pieces))
        by_pair.setdefault(f"{layer}/{kind}" if layer else kind, []).append(span / 1000.0)
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
    return out


def is_sm_mode(mode: str) -> bool:
    return mode in SM_MODES


__all__ = [
    "AG",
    "RS",
    "Pairs",
    "PipelineModel",
    "apply_fuse",
    "find_pairs",
    "pair_names",
    "pipeline_ns",
]
