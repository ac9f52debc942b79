"""GEMMs by shape (metrics.md §8): which GPU kernels are GEMMs, their (batch, M, K, N, dtype) from the
launching CPU op's `Input Dims` and `Input type`, their layer label, and their isolated baselines.

A baseline is never invented: it is the median of isolated samples of the same shape (from the run,
its reference run or a calibration), else a linear interpolation between isolated shapes that share
two of the three dims and bracket the third; else there is none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.gemm_shapes import GEMM_OPERANDS, GemmCall, GemmShape, parse_shape
from tpscope.trace import ActivityClass, RankTrace, Run
from tpscope.trace.columns import unique_rows

__all__ = ["GEMM_OPERANDS", "GemmCall", "GemmShape", "parse_shape"]  # re-exported: §8's shape rules

MIN_SAMPLES = 3  # §8: isolated samples a baseline needs
RULES = (
    "none",
    "same shape",
    "interpolated along M",
    "interpolated along K",
    "interpolated along N",
)
SOURCES = ("run", "reference", "calibration")
LAYER_PREFIX = "tpscope/"  # CPU ranges `tpscope/<layer>/<op>` name a GEMM's layer


@dataclass(frozen=True, slots=True)
class Gemms:
    """Every GEMM kernel of a run: one row each, with ids into the tuples."""

    act: np.ndarray  # int64 row of RunActivities
    shape: np.ndarray  # int64 index into shapes
    grid: np.ndarray  # int64 index into grids
    kernel: np.ndarray  # int64 index into kernels (the kernel's name: its class)
    layer: np.ndarray  # int64 index into layers, -1 outside a `tpscope/<layer>/<op>` range
    shapes: tuple[GemmShape, ...]
    grids: tuple[tuple[int, int, int], ...]
    kernels: tuple[str, ...]
    layers: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.act)


def _ids(values: list, table: dict) -> np.ndarray:
    return np.array([table.setdefault(v, len(table)) for v in values], np.int64)


def _layers(rank, launch_ns: np.ndarray, tid: np.ndarray, table: dict) -> np.ndarray:
    """Per launch: the `tpscope/<layer>/<op>` CPU range of its thread that holds it (latest start),
    as an id into `table` ("<layer>/<op>"); -1 outside one."""
    out = np.full(len(launch_ns), -1, np.int64)
    a, sym = rank.annotations, rank.symbols
    ids = np.unique(a.name_id[a.name_id >= 0])  # a loop over distinct names, not over ranges
    layer_ids = [
        i for i in ids.tolist() if sym[i].startswith(LAYER_PREFIX) and sym[i].count("/") == 2
    ]
    keep = np.flatnonzero(np.isin(a.name_id, layer_ids) & ~a.on_gpu)
    if not len(keep) or not len(launch_ns):
        return out
    for t in np.unique(tid).tolist():  # a loop over CPU threads
        rows = keep[a.tid[keep] == t]
        if not len(rows):
            continue
        rows = rows[np.argsort(a.start_ns[rows], kind="stable")]
        mine = np.flatnonzero(tid == t)
        pos = np.searchsorted(a.start_ns[rows], launch_ns[mine], side="right") - 1
        ok = pos >= 0
        hit = rows[np.maximum(pos, 0)]
        ok &= a.end_ns[hit] >= launch_ns[mine]
        uniq, inverse = np.unique(a.name_id[hit], return_inverse=True)
        label = _ids([sym[i].removeprefix(LAYER_PREFIX) for i in uniq.tolist()], table)[
            inverse.reshape(-1)
        ]
        out[mine[ok]] = label[ok]
    return out


class GemmFinder:
    """A run's GEMM kernels: compute kernels whose launching CPU op is a GEMM op with parseable
    dims (metrics.md §8). Found one rank at a time (`add`), in the pass of `run_activities` that
    reads each rank once; ids are given in the order the ranks are added. Parsing runs once per
    distinct (op, dims, type), not per kernel."""

    def __init__(self) -> None:
        self.shapes: dict[GemmShape, int] = {}
        self.grids: dict[tuple[int, int, int], int] = {}
        self.kernels: dict[str, int] = {}
        self.layers: dict[str, int] = {}
        self.parts: dict[str, list[np.ndarray]] = {
            k: [] for k in ("act", "shape", "grid", "kernel", "layer")
        }

    def add(self, r: RankTrace, first_row: int) -> None:
        """The GEMMs of rank `r`, whose first activity is row `first_row` of RunActivities."""
        g, sym, parts = r.gpu, r.symbols, self.parts
        cand = np.flatnonzero(
            (g.cls == ActivityClass.COMPUTE) & (g.op_name_id >= 0) & (g.dims_id >= 0)
        )
        if not len(cand):
            return
        uniq, inverse = unique_rows(g.op_name_id[cand], g.dims_id[cand], g.types_id[cand])
        parsed = [
            parse_shape(sym[o], sym[d], sym[t] if t >= 0 else "") for o, d, t in uniq.tolist()
        ]
        shapes = self.shapes
        sid = np.array(
            [shapes.setdefault(p, len(shapes)) if p is not None else -1 for p in parsed], np.int64
        )
        row_shape = sid[inverse]
        rows = cand[row_shape >= 0]
        if not len(rows):
            return
        parts["act"].append(first_row + rows)
        parts["shape"].append(row_shape[row_shape >= 0])
        guniq, ginv = unique_rows(*g.grid[rows].T)
        parts["grid"].append(_ids([tuple(x) for x in guniq.tolist()], self.grids)[ginv])
        kuniq, kinv = np.unique(g.name_id[rows], return_inverse=True)
        parts["kernel"].append(
            _ids([sym[k] for k in kuniq.tolist()], self.kernels)[kinv.reshape(-1)]
        )
        parts["layer"].append(_layers(r, g.launch_start_ns[rows], g.launch_tid[rows], self.layers))

    def finish(self) -> Gemms:
        cols = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in self.parts.items()}
        return Gemms(
            **cols,
            shapes=_keys(self.shapes),
            grids=_keys(self.grids),
            kernels=_keys(self.kernels),
            layers=_keys(self.layers),
        )


def _keys(table: dict) -> tuple:
    out = [None] * len(table)
    for k, i in table.items():
        out[i] = k
    return tuple(out)


# ---- isolated samples and baselines ------------------------------------------------------------

Samples = dict[tuple[GemmShape, tuple[int, int, int] | int], np.ndarray]
"""(shape, grid) -> isolated durations in ns; calibrations key by (shape, SM margin) instead."""


def isolated_samples(gemms: Gemms, dur_ns: np.ndarray, isolated: np.ndarray) -> Samples:
    """Durations of the isolated GEMMs (`isolated`: per GEMM row) by (shape, grid)."""
    rows = np.flatnonzero(isolated)
    out: Samples = {}
    if not len(rows):
        return out
    uniq, inverse = unique_rows(gemms.shape[rows], gemms.grid[rows])
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    d = dur_ns[rows][order]
    for j, (s, gr) in enumerate(uniq.tolist()):  # a loop over distinct (shape, grid)
        out[(gemms.shapes[s], gemms.grids[gr])] = d[bounds[j] : bounds[j + 1]]
    return out


@dataclass(frozen=True, slots=True)
class Baseline:
    """The isolated time of one shape (metrics.md §8)."""

    full_ns: float  # isolated, with every SM (the grid with the most CTAs among the samples)
    rule: int  # index into RULES
    source: str  # SOURCES entry of the samples; interpolations: both brackets' ("run+reference") when they differ
    n_samples: int
    noise: float | None  # relative half-width of the samples' [p10, p90]; None when interpolated
    # the grid of the samples, None for calibrations/interpolations
    grid: tuple[int, int, int] | None


def _ctas(grid) -> int:
    return int(np.prod(grid)) if isinstance(grid, tuple) and min(grid) > 0 else -1


def _noise(x: np.ndarray) -> float:
    p10, p50, p90 = np.percentile(x, [10, 50, 90])
    return float((p90 - p10) / 2 / p50) if p50 > 0 else 0.0


def _by_shape(pool: Samples) -> dict[GemmShape, list[tuple]]:
    out: dict[GemmShape, list[tuple]] = {}
    for (s, grid), x in pool.items():
        out.setdefault(s, []).append((grid, x))
    return out


def exact_baseline(
    shape: GemmShape, pools: list[Samples], index: list[dict] | None = None
) -> Baseline | None:
    """Rule 1: isolated samples of the same shape, first source that has them (run, reference,
    calibration); within a source the grid with the most CTAs (calibrations: SM margin 0).
    `index`: the pools by shape (`_by_shape`), when the caller asks for many shapes."""
    index = index if index is not None else [_by_shape(p) for p in pools]
    for source, pool in enumerate(pools):
        if source == 2:
            x = pool.get((shape, 0))
            if x is not None and len(x) >= MIN_SAMPLES:
                return Baseline(float(np.median(x)), 1, SOURCES[source], len(x), _noise(x), None)
            continue
        best = None
        for grid, x in index[source].get(shape, ()):
            if len(x) >= MIN_SAMPLES and (best is None or _ctas(grid) > _ctas(best[0])):
                best = (grid, x)
        if best is not None:
            return Baseline(
                float(np.median(best[1])),
                1,
                SOURCES[source],
                len(best[1]),
                _noise(best[1]),
                best[0],
            )
    return None


def interpolated_baseline(shape: GemmShape, known: dict[GemmShape, Baseline]) -> Baseline | None:
    """Rule 2: shapes with an exact baseline that share batch, dtype and two of the three dims, one
    below and one above along the third: linear in that dim between the nearest two. Never beyond
    them, never from shapes that differ in two dims."""
    dims = ("m", "k", "n")
    for axis, name in enumerate(dims):
        others = [d for d in dims if d != name]
        line = sorted(
            (getattr(s, name), b)
            for s, b in known.items()
            if s.batch == shape.batch
            and s.dtype == shape.dtype
            and all(getattr(s, o) == getattr(shape, o) for o in others)
        )
        x = getattr(shape, name)
        lo = [p for p in line if p[0] < x]
        hi = [p for p in line if p[0] > x]
        if lo and hi:
            (x0, b0), (x1, b1) = lo[-1], hi[0]
            t = (x - x0) / (x1 - x0)
            source = b0.source if b0.source == b1.source else f"{b0.source}+{b1.source}"
            return Baseline(
                b0.full_ns + t * (b1.full_ns - b0.full_ns),
                2 + axis,
                source,
                b0.n_samples + b1.n_samples,
                None,
                None,
            )
    return None


def baselines(shapes: tuple[GemmShape, ...], pools: list[Samples]) -> list[Baseline | None]:
    """Per shape: its baseline by the first rule that gives one (metrics.md §8)."""
    index = [_by_shape(p) for p in pools]
    exact = {s: b for s in shapes if (b := exact_baseline(s, pools, index)) is not None}
    every = {s for pool in pools for s, _ in pool}
    known = dict(exact)
    for s in every - set(exact):  # shapes only isolated elsewhere still anchor interpolations
        b = exact_baseline(s, pools, index)
        if b is not None:
            known[s] = b
    return [exact.get(s) or interpolated_baseline(s, known) for s in shapes]


def same_grid_ns(
    shape: GemmShape,
    grid: tuple[int, int, int],
    base: Baseline | None,
    pools: list[Samples],
    margin: int | None,
) -> float | None:
    """The isolated time of `shape` on as many SMs as the overlapped GEMM had: isolated samples at its
    own grid (run, then reference), else the baseline times the calibrated ratio (time at the run's
    SM margin / time at margin 0), so that no event-timed figure mixes with kernel durations; the
    full baseline itself when its grid is this grid. None when unknown."""
    if base is not None and base.rule == 1 and base.grid == grid:
        return base.full_ns
    for pool in pools[:2]:
        x = pool.get((shape, grid))
        if x is not None and len(x) >= MIN_SAMPLES:
            return float(np.median(x))
    if margin and base is not None and len(pools) > 2:  # calibrated: the ratio margin / no margin
        x, x0 = pools[2].get((shape, margin)), pools[2].get((shape, 0))
        if x is not None and x0 is not None and min(len(x), len(x0)) >= MIN_SAMPLES:
            return base.full_ns * float(np.median(x)) / float(np.median(x0))
    return None


def gemm_calls(run: Run) -> list[GemmCall]:
    """The distinct GEMM calls (op, dims, strides, type) of every rank, in shape order."""
    seen: dict[tuple[str, str, str, str], GemmCall] = {}
    for r in run.ranks:
        g, sym = r.gpu, r.symbols
        rows = np.flatnonzero(
            (g.cls == ActivityClass.COMPUTE) & (g.op_name_id >= 0) & (g.dims_id >= 0)
        )
        if not len(rows):
            continue
        uniq, _ = unique_rows(
            g.op_name_id[rows], g.dims_id[rows], g.strides_id[rows], g.types_id[rows]
        )
        for o, d, s, t in uniq.tolist():  # a loop over distinct calls
            key = tuple(sym[i] if i >= 0 else "" for i in (o, d, s, t))
            call = GemmCall.of(*key)
            if call is not None and key not in seen:
                seen[key] = call
    return sorted(seen.values(), key=lambda c: (c.shape, c.op, c.dims, c.strides))
