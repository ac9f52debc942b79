"""Events' JSON text -> raw columns through the C extension `_event_columns` (yyjson), without
building a Python object per event.

`extract_text` gives the same `RawColumns` as decoding the text with msgspec and running
`extract.extract` on the events (the same rows, values and symbol texts; symbol ids may be
numbered differently, which `extract.merge` and every later stage allow). The C side declines
(None) whatever msgspec's typed decoding could read differently (odd field types, integers past
64 bits, duplicated keys, invalid JSON); so does this module where the extension is not built.
The caller then decodes with msgspec. docs/benchmarks.md gives the speeds.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tpscope.trace.columns import MISSING, as_int
from tpscope.trace.read import cut
from tpscope.trace.read.decode import decode_run
from tpscope.trace.read.extract import (
    HOSTNAME_EVENTS,
    KIND_OF_CATEGORY,
    RawColumns,
    collective_columns,
    extract,
    group_code,
    lane_number,
    merge,
    ranks_text,
    rows_by_group,
    start_end_ns,
    usable_times,
)
from tpscope.trace.read.fields import plain_args, plain_columns, raw_args, raw_columns

try:
    from tpscope.trace import _event_columns
except ImportError:  # pragma: no cover - not built (no C compiler): msgspec reads everything
    _event_columns = None

# text parsed at once: small enough to stay in the CPU's cache (docs/benchmarks.md)
NATIVE_CHUNK_BYTES = 1 << 20

_DTYPES = {
    **dict.fromkeys(
        "ph cat name pid_sym tid_sym device_sym stream_sym coll_name arg_name"
        " pg_name dtype pg_ranks pg_desc".split(),
        np.int32,
    ),
    **dict.fromkeys(
        "pid tid device stream coll_row seq in_nelems out_nelems group_size peer launch_row grid"
        " block".split(),
        np.int64,
    ),
    **dict.fromkeys(("ts", "dur"), np.float64),
    **dict.fromkeys(("has_device", "has_stream"), np.bool_),
    **dict.fromkeys((a.column_name for a in plain_args()), np.int64),
    **dict.fromkeys((a.column_name for a in raw_args()), np.int32),
}


def available() -> bool:
    return _event_columns is not None


def extract_text(
    text: bytes | bytearray | memoryview,
    lo: int,
    hi: int,
    chunk_bytes: int = NATIVE_CHUNK_BYTES,
    threads: int = 1,
) -> RawColumns | None:
    """The raw columns of the events `text[lo:hi]` (whole events separated by commas), times
    relative; None when the C extension is missing or declines the text. With `threads > 1` the
    span is cut at event boundaries into that many runs, read at once in threads (the C reader
    does not hold the GIL) and merged."""
    if _event_columns is None:
        return None
    spans = cut.spans(text, lo, hi, threads) if threads > 1 and hi - lo > 2 * chunk_bytes else []
    if len(spans) > 1:
        with ThreadPoolExecutor(len(spans)) as pool:
            parts = list(pool.map(lambda s: _scan(text, s[0], s[1], chunk_bytes), spans))
        if all(p is not None for p in parts):
            return merge(parts)
        # a cut inside an event (a nested "}, {"), or a text the C reader declines: in one run,
        # whose chunks grow past such a cut
    return _scan(text, lo, hi, chunk_bytes)


def _scan(text, lo: int, hi: int, chunk_bytes: int) -> RawColumns | None:
    """The C reader over `text[lo:hi]`, in calls that each hold at most about one event per 128
    bytes of the span in C's columns; an event whose parse tree would be too large for its memory
    bound (many tiny nested values) is read by msgspec instead, which skips the arguments no
    table keeps."""
    parts = []
    while True:
        scanned = _event_columns.scan(text, lo, hi, chunk_bytes)
        if scanned is None:
            return None
        symbols, raw, _, stop, resume = scanned
        cols = {k: np.frombuffer(v, dtype=_DTYPES[k]) for k, v in raw.items()}
        del raw
        for k in ("grid", "block"):
            cols[k] = cols[k].reshape(-1, 3)
        parts.append(_Columns(symbols, cols).raw_columns())
        del cols
        if stop >= hi:
            return merge(parts)
        if resume == stop:  # many more events than bytes / 128: read in another call
            lo = stop
            continue
        events = decode_run(text, stop, resume, hi)
        if events is None:
            return None
        resume = events[1]
        parts.append(extract(events[0], 0))
        del events
        if resume >= hi:
            return merge(parts)
        lo = resume + 1


class _Columns:
    """The per-event columns of `_event_columns.scan`, grouped as `extract.extract` groups them."""

    def __init__(self, symbols: list[str], cols: dict[str, np.ndarray]) -> None:
        self.symbols = list(symbols)
        self.cols = cols
        # null or absent strings (-1 from C) get one id of their own whose text is "", as
        # SymbolTable gives None
        self.none_id = self._add(None)
        self._lanes: dict[str, np.ndarray] = {}

    def _add(self, text: str | None) -> int:
        self.symbols.append("" if text is None else text)
        return len(self.symbols) - 1

    def sym(self, ids: np.ndarray) -> np.ndarray:
        return np.where(ids < 0, self.none_id, ids).astype(np.int32)

    def _by_symbol(self, ids: np.ndarray, function, dtype) -> np.ndarray:
        """`function(symbols[id])` per id (>= 0), computed once per distinct id."""
        distinct = np.flatnonzero(np.bincount(ids[ids >= 0], minlength=1))
        table = np.zeros(max(len(self.symbols), 1), dtype=dtype)
        for i in distinct.tolist():
            table[i] = function(self.symbols[i])
        return table[np.maximum(ids, 0)]

    def lane(self, which: str) -> np.ndarray:
        """pid or tid per event as `extract.lane_number` makes it (strings parsed or hashed)."""
        if which not in self._lanes:
            values, strings = self.cols[which], self.cols[which + "_sym"]
            if (strings >= 0).any():
                named = self._by_symbol(strings, lane_number, np.int64)
                values = np.where(strings >= 0, named, values)
            self._lanes[which] = values
        return self._lanes[which]

    def _distinct(self, ids: np.ndarray) -> tuple[list[int], np.ndarray]:
        """(the distinct ids, -1 among them when present; per id, its index in that list)."""
        seen = np.bincount(ids + 1, minlength=len(self.symbols) + 1)
        distinct = np.flatnonzero(seen) - 1
        index = np.zeros(len(seen), np.int64)
        index[distinct + 1] = np.arange(len(distinct))
        return distinct.tolist(), index[ids + 1]

    def group_codes(self) -> np.ndarray:
        """Per event, `extract.group_code` of its (ph, cat), computed once per distinct pair."""
        ph_ids, ph_at = self._distinct(self.cols["ph"])
        cat_ids, cat_at = self._distinct(self.cols["cat"])

        def text(i: int) -> str | None:
            return self.symbols[i] if i >= 0 else None

        table = np.array(
            [[group_code(text(p), text(c)) for c in cat_ids] for p in ph_ids], np.int8
        ).reshape(len(ph_ids), len(cat_ids))
        return table[ph_at, cat_at]

    def raw_columns(self) -> RawColumns:
        rows = rows_by_group(self.group_codes())
        dropped: dict[str, int] = {}
        groups: dict[str, dict[str, np.ndarray]] = {}
        for group in ("gpu", "launch", "cpu_op", "cpu_range", "gpu_range", "sync"):
            r, out = self._timed(group, rows[group], dropped)
            out["name_id"] = self.sym(self.cols["name"][r])
            c = self.cols
            for column in plain_columns(group):  # the table's plain arguments (fields.py)
                out[column] = c[column][r]
            for a in raw_columns(group):  # and its raw ones
                out[a.column_name] = c[a.column_name][r]
            if group == "gpu":
                out["kind"] = self._by_symbol(
                    c["cat"][r], lambda s: KIND_OF_CATEGORY[s.lower()], np.int8
                )
                out["grid"], out["block"] = self._launch_dims(r)
                out.update(self._lanes_of(r))
                out.update(self._collectives(r))
            elif group in ("launch", "cpu_op", "cpu_range"):
                out["tid"] = self.lane("tid")[r]
                if group == "cpu_op":
                    out.update(self._collectives(r))
            else:  # gpu_range, sync
                out.update(self._lanes_of(r))
            groups[group] = out
        return RawColumns(
            symbols=self.symbols,
            groups=groups,
            dropped=dropped,
            hostnames=self._hostnames(rows["meta"]),
        )

    def _timed(self, group: str, r: np.ndarray, dropped: dict) -> tuple[np.ndarray, dict]:
        """extract._Extractor.timed: the rows with a usable ts and dur, and their start/end."""
        ts, dur = self.cols["ts"][r], self.cols["dur"][r]
        keep = usable_times(ts, dur)
        if not keep.all():
            dropped[group] = int((~keep).sum())
            r, ts, dur = r[keep], ts[keep], dur[keep]
        return r, start_end_ns(ts, dur)

    def _lanes_of(self, r: np.ndarray) -> dict[str, np.ndarray]:
        """(args.device, args.stream), else (pid, tid) for old traces (extract._Extractor.lanes)."""
        c = self.cols
        out = {}
        for arg, fallback in (("device", "pid"), ("stream", "tid")):
            value = c[arg][r]
            named = c[arg + "_sym"][r]
            if (named >= 0).any():  # strings ("0x0"): int_column's reading of them
                value = np.where(named >= 0, self._by_symbol(named, as_int, np.int64), value)
            out[arg] = np.where(c["has_" + arg][r], value, self.lane(fallback)[r])
        return out

    def _sparse_rows(self, rows_col: str, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in `r`, positions in the sparse columns) of the rows the sparse ones hold."""
        sparse = self.cols[rows_col]
        if len(sparse) == 0 or len(r) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        pos = np.minimum(np.searchsorted(sparse, r), len(sparse) - 1)
        hit = np.flatnonzero(sparse[pos] == r)
        return hit, pos[hit]

    def _launch_dims(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        grid = np.full((len(r), 3), MISSING, dtype=np.int64)
        block = grid.copy()
        at, src = self._sparse_rows("launch_row", r)
        grid[at] = self.cols["grid"][src]
        block[at] = self.cols["block"][src]
        return grid, block

    def _collectives(self, r: np.ndarray) -> dict[str, np.ndarray]:
        """extract._Extractor.collectives: -1 except where `Collective name` is a string."""
        out = collective_columns(len(r))
        at, src = self._sparse_rows("coll_row", r)
        if len(at) == 0:
            return out
        c = self.cols
        out["coll_name_id"][at] = c["coll_name"][r[at]]
        for f, k in (("pg_name_id", "pg_name"), ("dtype_id", "dtype"), ("pg_desc_id", "pg_desc")):
            out[f][at] = self.sym(c[k][src])
        out["pg_ranks_id"][at] = self._ranks_ids(c["pg_ranks"][src])
        for f in ("seq", "in_nelems", "out_nelems", "group_size", "peer"):
            out[f][at] = c[f][src]
        return out

    def _ranks_ids(self, ids: np.ndarray) -> np.ndarray:
        """Symbol ids of `ranks_text` of each `Process Group Ranks` (lists arrive as "0,1")."""
        made: dict[str | None, int] = {None: self.none_id}
        index = {s: i for i, s in enumerate(self.symbols[: self.none_id])}

        def canonical(text: str) -> int:
            t = ranks_text(text)
            if t not in made:
                made[t] = index[t] if t in index else self._add(t)
            return made[t]

        return np.where(ids < 0, self.none_id, self._by_symbol(ids, canonical, np.int32)).astype(
            np.int32
        )

    def _hostnames(self, meta: np.ndarray) -> list[str]:
        """args.name of the `hostname` metadata events, in order."""
        names, values = self.cols["name"][meta], self.cols["arg_name"][meta]
        keys = [i for i, s in enumerate(self.symbols) if s in HOSTNAME_EVENTS]
        held = values[np.isin(names, keys) & (values >= 0)].tolist()
        return [self.symbols[v] for v in held if self.symbols[v]]
