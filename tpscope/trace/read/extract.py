"""Stage 1 of normalization: decoded events -> raw typed columns per event group, no joins.

Extraction is the per-event part of loading; it runs on any slice of a trace's events, so the
halves of one big file can be extracted in two processes and merged (`merge`). Symbol ids are
local to one `RawColumns`; `merge` remaps them. Joins, classes, lanes and steps come later
(`assemble.py`), over whole arrays.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

import numpy as np

from tpscope.trace.classify import GPU_CATEGORIES
from tpscope.trace.columns import MISSING, SymbolTable, float_column, int_column, us_to_ns
from tpscope.trace.read.fields import plain_columns, raw_args, raw_columns
from tpscope.trace.read.schema import Args, Event

# lower-case trace category -> event group. Older traces spell them "Kernel", "Runtime", "Memcpy".
GROUP_OF_CATEGORY: dict[str, str] = {
    "kernel": "gpu",
    "gpu_memcpy": "gpu",
    "memcpy": "gpu",
    "gpu_memset": "gpu",
    "memset": "gpu",
    "cuda_runtime": "launch",
    "cuda_driver": "launch",
    "runtime": "launch",
    "user_annotation": "cpu_range",
    "gpu_user_annotation": "gpu_range",
    "cpu_op": "cpu_op",
    "cuda_sync": "sync",
}
KIND_OF_CATEGORY = {
    **GPU_CATEGORIES,
    "memcpy": GPU_CATEGORIES["gpu_memcpy"],
    "memset": GPU_CATEGORIES["gpu_memset"],
}
# columns that hold ids into RawColumns.symbols (remapped by `merge`)
SYMBOL_COLUMNS = frozenset(
    {
        "name_id",
        "coll_name_id",
        "pg_name_id",
        "dtype_id",
        "pg_ranks_id",
        "pg_desc_id",
        *(a.column_name for a in raw_args()),  # the raw arguments' text (fields.py)
    }
)
COLLECTIVE_COLUMNS = (
    "coll_name_id",
    "pg_name_id",
    "seq",
    "in_nelems",
    "out_nelems",
    "dtype_id",
    "group_size",
    "pg_ranks_id",
    "pg_desc_id",
    "peer",
)
_EMPTY_ARGS = Args()
# the blanks int() strips: ASCII's six, and every other Unicode space (not \x1c-\x1f, which
# str.isspace counts and int() refuses)
_INT_BLANKS = r"(?:[ \t\n\r\x0b\x0c]|(?![\x00-\x7f])\s)*"
_LANE_DIGITS = re.compile(_INT_BLANKS + r"[+-]?[0-9]{1,18}" + _INT_BLANKS)
_NAMED_LANE_BASE = 1 << 40  # lanes named by strings (old traces) get ids far from real streams


@dataclass(slots=True)
class RawColumns:
    """Per event group, typed columns of the events of (part of) one trace."""

    symbols: list[str]
    groups: dict[str, dict[str, np.ndarray]]
    dropped: dict[str, int] = field(default_factory=dict)  # events without usable ts/dur, per group
    hostnames: list[str] = field(default_factory=list)

    def shift_times(self, base_ns: int) -> None:
        """Add `base_ns` to every *_ns column (parts are extracted before the base is known)."""
        if base_ns:
            for cols in self.groups.values():
                for name in ("start_ns", "end_ns"):
                    if name in cols:
                        cols[name] = cols[name] + base_ns


def _values(items: list, attr: str) -> list:
    """`[getattr(x, attr) for x in items]`, in C (`map` with `attrgetter`)."""
    return list(map(attrgetter(attr), items))


def _positions(distinct: list, items: list) -> np.ndarray:
    """Per item, its index in `distinct` (which holds every item once)."""
    index = dict(zip(distinct, range(len(distinct))))
    return np.fromiter(map(index.__getitem__, items), dtype=np.int64, count=len(items))


def tid_column(events: list[Event]) -> np.ndarray:
    """The events' `tid` as int64: integers in C, string tids through `lane_number`."""
    values = _values(events, "tid")
    if str not in set(map(type, values)):  # numpy would parse strings its own way
        try:
            return np.array([MISSING if v is None else v for v in values], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
    return int_column([lane_number(v) for v in values])


def _args(events: list[Event]) -> list[Args]:
    return [a if a is not None else _EMPTY_ARGS for a in map(attrgetter("args"), events)]


def lane_number(v: int | str | None) -> int:
    """A pid/tid as a number: integers as they are, numeric strings parsed, other strings hashed."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        # a sign and at most 18 ASCII digits (int64 holds them all); "1_000", "²" or "٣" are names
        if _LANE_DIGITS.fullmatch(v):
            return int(v)
        return _NAMED_LANE_BASE + zlib.crc32(v.encode("utf-8", "replace"))
    return MISSING


def _select(events: list[Event], rows: np.ndarray) -> list[Event]:
    if len(rows) == 0:
        return []
    if len(rows) == 1:
        return [events[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(events))


GROUP_NAMES = sorted(set(GROUP_OF_CATEGORY.values()))
META_CODE = len(GROUP_NAMES) + 1  # the code of metadata events (ph "M")
HOSTNAME_EVENTS = ("hostname", "host_name")  # metadata events whose args.name is the host


def group_code(ph: str | None, cat: str | None) -> int:
    """An event's group as a code: 1 + its index in GROUP_NAMES for a complete event of a known
    category (any spelling: "Kernel", "Runtime"), META_CODE for a metadata event whatever its
    category, 0 for everything else."""
    if ph == "M":
        return META_CODE
    if ph == "X" and isinstance(cat, str) and cat.lower() in GROUP_OF_CATEGORY:
        return GROUP_NAMES.index(GROUP_OF_CATEGORY[cat.lower()]) + 1
    return 0


def rows_by_group(codes: np.ndarray) -> dict[str, np.ndarray]:
    """Row indices of each group (and "meta") from each row's `group_code`, in row order."""
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(META_CODE + 2))
    groups = {g: order[bounds[k + 1] : bounds[k + 2]] for k, g in enumerate(GROUP_NAMES)}
    groups["meta"] = order[bounds[META_CODE] : bounds[META_CODE + 1]]
    return groups


def group_rows(events: list[Event]) -> dict[str, np.ndarray]:
    """Row indices of each group of complete events, and of metadata events ("meta")."""
    pairs = list(map(attrgetter("ph", "cat"), events))
    code_of_pair = {pair: group_code(*pair) for pair in set(pairs)}  # once per distinct pair
    codes = np.fromiter(map(code_of_pair.__getitem__, pairs), dtype=np.int8, count=len(pairs))
    return rows_by_group(codes)


def usable_times(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Which events have a usable ts and dur (µs): finite, dur >= 0, |ts| below 9e15."""
    return np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & (np.abs(ts) < 9e15)


def start_end_ns(ts: np.ndarray, dur: np.ndarray, base_ns: int = 0) -> dict[str, np.ndarray]:
    """The start and end columns in ns of usable times (a duration capped at 9e12 µs)."""
    start = us_to_ns(ts) + base_ns
    return {"start_ns": start, "end_ns": start + us_to_ns(np.minimum(dur, 9e12))}


def collective_columns(n: int) -> dict[str, np.ndarray]:
    """The collective metadata columns of `n` events, all -1 (int32 ids, int64 values)."""
    return {
        f: np.full(n, MISSING, dtype=np.int32 if f.endswith("_id") else np.int64)
        for f in COLLECTIVE_COLUMNS
    }


class _Extractor:
    def __init__(self, base_ns: int) -> None:
        self.base_ns = base_ns
        self.symbols = SymbolTable()
        self.dropped: dict[str, int] = {}

    def timed(self, group: str, events: list[Event]) -> tuple[list[Event], dict[str, np.ndarray]]:
        """Events with a usable ts and dur (finite, dur >= 0), and their start/end in ns."""
        ts = float_column(_values(events, "ts"))
        dur = float_column(_values(events, "dur"))
        keep = usable_times(ts, dur)
        if not keep.all():
            self.dropped[group] = int((~keep).sum())
            events = [e for e, k in zip(events, keep) if k]
            ts, dur = ts[keep], dur[keep]
        return events, start_end_ns(ts, dur, self.base_ns)

    def names(self, events: list[Event]) -> np.ndarray:
        return self.symbols.ids(_values(events, "name"))

    def raw_ids(self, args: list[Args], field: str) -> np.ndarray:
        """Symbol ids of a raw JSON argument's text (`Input Dims`, `Input type`, `Input Strides`)."""
        texts = list(map(bytes, map(attrgetter(field), args)))
        # each distinct text decoded once, in first-seen order (ids as if every one were decoded)
        distinct = list(dict.fromkeys(texts))
        ids = self.symbols.ids([t.decode("utf-8", "replace") for t in distinct])
        return ids[_positions(distinct, texts)] if len(distinct) < len(texts) else ids

    def lanes(self, events: list[Event], args: list[Args]) -> dict[str, np.ndarray]:
        """(args.device, args.stream), else (pid, tid) for old traces."""
        out = {}
        for name, arg, fallback in (("device", "device", "pid"), ("stream", "stream", "tid")):
            values = _values(args, arg)
            if None in values:
                values = [
                    v if v is not None else lane_number(getattr(e, fallback))
                    for v, e in zip(values, events)
                ]
            out[name] = int_column(values)
        return out

    def collectives(self, args: list[Args]) -> dict[str, np.ndarray]:
        """Collective metadata columns; -1 except where `Collective name` is present."""
        out = collective_columns(len(args))
        rows = [i for i, a in enumerate(args) if a.collective is not None]
        if not rows:
            return out
        described = [args[i] for i in rows]
        sym = self.symbols
        out["coll_name_id"][rows] = sym.ids([a.collective for a in described])
        out["pg_name_id"][rows] = sym.ids([a.pg_name for a in described])
        out["dtype_id"][rows] = sym.ids([a.dtype for a in described])
        out["pg_ranks_id"][rows] = sym.ids([ranks_text(a.pg_ranks) for a in described])
        out["pg_desc_id"][rows] = sym.ids([a.pg_desc for a in described])
        for f, attr in (
            ("seq", "seq"),
            ("in_nelems", "in_nelems"),
            ("out_nelems", "out_nelems"),
            ("group_size", "group_size"),
        ):
            out[f][rows] = int_column([getattr(a, attr) for a in described])
        out["peer"][rows] = int_column(
            [a.dst_rank if a.dst_rank is not None else a.src_rank for a in described]
        )
        return out


def plain(args: list[Args], group: str) -> dict[str, np.ndarray]:
    """The table's plain argument columns of one group (fields.py), -1 where absent."""
    return {c: int_column(_values(args, c)) for c in plain_columns(group)}


def ranks_text(ranks: str | list | None) -> str | None:
    """`Process Group Ranks` ('[0, 1]' or [0, 1]) as '0,1'; None when absent or empty ('[]' on `wait`)."""
    if ranks is None:
        return None
    text = ranks if isinstance(ranks, str) else ",".join(str(r) for r in ranks)
    text = text.strip("[] ").replace(" ", "")
    return text or None


def _launch_dims(values: list) -> np.ndarray:
    """(n, 3) int64 grid or block dimensions; -1 where absent or malformed."""
    out = np.full((len(values), 3), MISSING, dtype=np.int64)
    present = [i for i, v in enumerate(values) if v is not None]
    if present:
        try:
            out[present] = np.array([values[i] for i in present], dtype=np.int64).reshape(
                len(present), 3
            )
        except (ValueError, TypeError, OverflowError):
            for i in present:
                v = values[i]
                if (
                    isinstance(v, list)
                    and len(v) == 3
                    and all(isinstance(x, int) and abs(x) < 2**62 for x in v)
                ):
                    out[i] = v
    return out


def extract(events: list[Event], base_ns: int = 0) -> RawColumns:
    """Typed columns of every event group of `events` (see the module docstring)."""
    x = _Extractor(base_ns)
    rows = group_rows(events)
    groups: dict[str, dict[str, np.ndarray]] = {}

    gpu, cols = x.timed("gpu", _select(events, rows["gpu"]))
    args = _args(gpu)
    kind_of = {cat: KIND_OF_CATEGORY[cat.lower()] for cat in set(_values(gpu, "cat"))}
    cols.update(
        name_id=x.names(gpu),
        kind=np.fromiter(
            map(kind_of.__getitem__, _values(gpu, "cat")), dtype=np.int8, count=len(gpu)
        ),
        grid=_launch_dims(_values(args, "grid")),
        block=_launch_dims(_values(args, "block")),
        **x.lanes(gpu, args),
        **x.collectives(args),
        **plain(args, "gpu"),
    )
    groups["gpu"] = cols

    launch, cols = x.timed("launch", _select(events, rows["launch"]))
    args = _args(launch)
    cols.update(
        name_id=x.names(launch),
        tid=tid_column(launch),
        **plain(args, "launch"),
    )
    groups["launch"] = cols

    # CPU ops: the metadata of the kernels they launch (External id), and their place on their
    # thread for the critical path's CPU side (metrics.md §7)
    ops, cols = x.timed("cpu_op", _select(events, rows["cpu_op"]))
    args = _args(ops)
    cols.update(
        name_id=x.names(ops),
        tid=tid_column(ops),
        **plain(args, "cpu_op"),
        **{a.column_name: x.raw_ids(args, a.attr) for a in raw_columns("cpu_op")},
        **x.collectives(args),
    )
    groups["cpu_op"] = cols

    for group in ("cpu_range", "gpu_range"):
        evs, cols = x.timed(group, _select(events, rows[group]))
        cols["name_id"] = x.names(evs)
        cols.update(plain(_args(evs), group))
        if group == "cpu_range":
            cols["tid"] = tid_column(evs)
            # a CPU run's gloo collectives are CPU ranges: their tensor shapes and types give
            # the collective's size (trace.cpu_activities)
            args = _args(evs)
            cols.update({a.column_name: x.raw_ids(args, a.attr) for a in raw_columns(group)})
        else:
            cols.update(x.lanes(evs, _args(evs)))
        groups[group] = cols

    sync, cols = x.timed("sync", _select(events, rows["sync"]))
    args = _args(sync)
    cols.update(
        name_id=x.names(sync),
        **plain(args, "sync"),
        **x.lanes(sync, args),
    )
    groups["sync"] = cols

    hostnames = [
        e.args.name
        for e in _select(events, rows["meta"])
        if e.name in HOSTNAME_EVENTS and e.args is not None and e.args.name
    ]
    return RawColumns(
        symbols=x.symbols.symbols, groups=groups, dropped=x.dropped, hostnames=hostnames
    )


# deeper raw arguments are refused whichever reader read them: Python's json and msgspec give up
# near 1,000 levels (a RecursionError), and no trace nests past a few
MAX_ARGUMENT_DEPTH = 100


RAW_ARGUMENT_COLUMNS = tuple(a.column_name for a in raw_args())


def arguments_too_deep(raw: RawColumns, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether a raw argument's JSON text (`Input Dims`...) nests deeper than `limit`."""
    ids = [cols[c] for cols in raw.groups.values() for c in RAW_ARGUMENT_COLUMNS if c in cols]
    used = np.unique(np.concatenate(ids)) if ids else np.zeros(0, np.int64)
    return too_deep([raw.symbols[i] for i in used.tolist() if i >= 0], limit)


def too_deep(symbols: list[str], limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether a text nests lists or objects deeper than `limit` (brackets inside strings are
    not counted)."""
    for text in symbols:
        if text.count("[") + text.count("{") <= limit:
            continue  # cannot be deeper (most symbols end here)
        depth, in_string, escaped = 0, False, False
        for c in text:
            if in_string:
                escaped, in_string = (
                    (not escaped and c == "\\"),
                    in_string and (escaped or c != '"'),
                )
            elif c == '"':
                in_string = True
            elif c in "[{":
                depth += 1
                if depth > limit:
                    return True
            elif c in "]}":
                depth -= 1
    return False


def merge(parts: list[RawColumns]) -> RawColumns:
    """One `RawColumns` from parts extracted separately (rows in part order, symbols remapped).
    The parts are consumed: each column of theirs is let go once merged, so that the file's
    columns are not held twice."""
    if len(parts) == 1:
        return parts[0]
    table = SymbolTable()
    remaps = [table.ids(p.symbols).astype(np.int64) for p in parts]
    groups: dict[str, dict[str, np.ndarray]] = {}
    for group in parts[0].groups:
        merged: dict[str, np.ndarray] = {}
        for col in list(parts[0].groups[group]):
            pieces = []
            for p, remap in zip(parts, remaps):
                a = p.groups[group].pop(col)
                if col in SYMBOL_COLUMNS and len(a):
                    a = np.where(a >= 0, remap[np.maximum(a, 0)], MISSING).astype(a.dtype)
                pieces.append(a)
            merged[col] = np.concatenate(pieces)
            del pieces
        groups[group] = merged
    dropped: dict[str, int] = {}
    for p in parts:
        for k, v in p.dropped.items():
            dropped[k] = dropped.get(k, 0) + v
    return RawColumns(
        symbols=table.symbols,
        groups=groups,
        dropped=dropped,
        hostnames=[h for p in parts for h in p.hostnames],
    )
