"""A CPU run's activities (metrics.md §1, "CPU runs"): when a rank has no GPU activity, its gloo
collectives are its communication and its innermost aten ops its compute, each CPU thread a lane.

The rows come back as plain columns; `assemble.py` turns them into the same `GpuActivities` table
a GPU run has, so every metric, the dashboard and the report work on it unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from tpscope.trace.classify import ActivityClass
from tpscope.trace.columns import MISSING, SymbolTable, containing
from tpscope.trace.read.extract import RawColumns

# metrics.md §1: what a CPU-side event is, by the start of its name; first match wins.
COMM_RANGE_PREFIXES = ("gloo:",)  # CPU ranges that are one collective (gloo's worker threads)
# issue or wait for a collective
NOT_COMPUTE_PREFIXES = (
    "c10d::",
    "record_param_comms",
    "ProfilerStep#",
)
# per collective kind (the name after "gloo:"): output elements per input element, as a function
# of the group size
OUT_PER_IN = {"all_gather": lambda n: n, "reduce_scatter": lambda n: 1 / n}
PG_NAME = (
    "gloo"  # the process group a CPU run's collectives are matched in (by order, metrics.md §5)
)


@dataclass(frozen=True, slots=True)
class CpuActivities:
    """One row per activity of a CPU run, by start: `name_id`s and symbol columns index the
    rank's symbol table; `tid` is the lane."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    name_id: np.ndarray  # int32
    cls: np.ndarray  # int8, ActivityClass
    tid: np.ndarray  # int64
    external_id: np.ndarray  # int64
    dims_id: np.ndarray  # int32, the input dims ("[[512, 256], ...]")
    coll_name_id: np.ndarray  # int32, the collective's name (`gloo:all_gather`), -1 for compute
    pg_name_id: np.ndarray  # int32
    in_nelems: np.ndarray  # int64
    out_nelems: np.ndarray  # int64
    dtype_id: np.ndarray  # int32
    group_size: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.start_ns)


def has_cpu_activity(raw: RawColumns) -> bool:
    """Whether a trace without GPU activity has CPU ops or gloo collectives to analyze instead."""
    return len(raw.groups["cpu_op"]["start_ns"]) > 0 or bool(_comm_rows(raw, raw.symbols).any())


def _starts_with(name_ids: np.ndarray, symbols: list[str], prefixes: tuple[str, ...]) -> np.ndarray:
    """Per row: whether its name starts with one of `prefixes` (each distinct name looked at once)."""
    if len(name_ids) == 0:
        return np.zeros(0, bool)
    uniq, inverse = np.unique(name_ids, return_inverse=True)
    hit = np.fromiter(
        (u >= 0 and symbols[u].startswith(prefixes) for u in uniq.tolist()), bool, len(uniq)
    )
    return hit[inverse.ravel()]


def _comm_rows(raw: RawColumns, symbols: list[str]) -> np.ndarray:
    return _starts_with(raw.groups["cpu_range"]["name_id"], symbols, COMM_RANGE_PREFIXES)


def _innermost(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Per op: whether no other op of its thread starts inside it (ops of a thread nest)."""
    n = len(start)
    if n == 0:
        return np.zeros(0, bool)
    order = np.lexsort((-end, start, tid))
    s_tid, s_start, s_end = tid[order], start[order], end[order]
    parent = np.zeros(n, bool)
    parent[:-1] = (s_tid[1:] == s_tid[:-1]) & (s_start[1:] < s_end[:-1])
    out = np.empty(n, bool)
    out[order] = ~parent
    return out


def _inside(
    start: np.ndarray, tid: np.ndarray, r_start: np.ndarray, r_end: np.ndarray, r_tid: np.ndarray
) -> np.ndarray:
    """Per op: whether it starts inside one of the ranges of its own thread (one pass per thread)."""
    out = np.zeros(len(start), bool)
    for t in np.unique(r_tid).tolist():
        ops, ranges = tid == t, np.flatnonzero(r_tid == t)
        order = ranges[np.argsort(r_start[ranges], kind="stable")]
        out[ops] = containing(r_start[order], r_end[order], start[ops], closed=True) >= 0
    return out


def _first_input(ids: np.ndarray, symbols: list[str], reduce) -> np.ndarray:
    """Per row: `reduce(first input)` of its JSON list of inputs (dims or types), once per
    distinct list; None where absent or malformed."""
    uniq, inverse = np.unique(ids, return_inverse=True)
    values = []
    for u in uniq.tolist():
        try:
            inputs = json.loads(symbols[u]) if u >= 0 and symbols[u] else []
            values.append(reduce(inputs[0]) if inputs else None)
        except (ValueError, TypeError, IndexError):
            values.append(None)
    return np.array(values, dtype=object)[inverse.ravel()]


def _nelems(dims: list) -> int:
    return int(np.prod([int(d) for d in dims])) if isinstance(dims, list) else None  # type: ignore[return-value]


def cpu_activities(raw: RawColumns, symbols: SymbolTable, group_size: int | None) -> CpuActivities:
    """The activities of a rank without GPU activity (see the module docstring). `group_size` is
    the world size of the trace's only process group, None when unknown."""
    sym = symbols.symbols
    ranges, ops = raw.groups["cpu_range"], raw.groups["cpu_op"]
    comm = np.flatnonzero(_comm_rows(raw, sym))
    c_start, c_end, c_tid = ranges["start_ns"][comm], ranges["end_ns"][comm], ranges["tid"][comm]
    compute = np.flatnonzero(
        _innermost(ops["start_ns"], ops["end_ns"], ops["tid"])
        & ~_starts_with(ops["name_id"], sym, NOT_COMPUTE_PREFIXES)
        & ~_inside(ops["start_ns"], ops["tid"], c_start, c_end, c_tid)
    )
    n_comm, n_compute = len(comm), len(compute)

    c_name = ranges["name_id"][comm]
    n_in = _first_input(ranges["dims_id"][comm], sym, _nelems)
    dtype = _first_input(ranges["types_id"][comm], sym, str)
    size = group_size if group_size else MISSING
    kinds = [sym[i][sym[i].find(":") + 1 :] for i in c_name.tolist()]
    n_out = [
        MISSING
        if x is None
        else int(round(x * OUT_PER_IN[k](size)))
        if k in OUT_PER_IN and size > 0
        else x
        for x, k in zip(n_in.tolist(), kinds)
    ]
    missing_i32 = np.full(n_compute, MISSING, np.int32)
    missing_i64 = np.full(n_compute, MISSING, np.int64)
    cols = {
        "start_ns": np.concatenate([c_start, ops["start_ns"][compute]]),
        "end_ns": np.concatenate([c_end, ops["end_ns"][compute]]),
        "name_id": np.concatenate([c_name, ops["name_id"][compute]]).astype(np.int32),
        "cls": np.concatenate(
            [
                np.full(n_comm, ActivityClass.COMM, np.int8),
                np.full(n_compute, ActivityClass.COMPUTE, np.int8),
            ]
        ),
        "tid": np.concatenate([c_tid, ops["tid"][compute]]),
        "external_id": np.concatenate(
            [np.full(n_comm, MISSING, np.int64), ops["external_id"][compute]]
        ),
        "dims_id": np.concatenate([ranges["dims_id"][comm], ops["dims_id"][compute]]).astype(
            np.int32
        ),
        "coll_name_id": np.concatenate([c_name, missing_i32]).astype(np.int32),
        "pg_name_id": np.concatenate([np.full(n_comm, symbols.id(PG_NAME), np.int32), missing_i32]),
        "in_nelems": np.concatenate(
            [np.array([MISSING if x is None else x for x in n_in.tolist()], np.int64), missing_i64]
        ),
        "out_nelems": np.concatenate([np.array(n_out, np.int64), missing_i64]),
        "dtype_id": np.concatenate(
            [
                np.array(
                    [MISSING if t is None else symbols.id(t) for t in dtype.tolist()], np.int32
                ),
                missing_i32,
            ]
        ),
        "group_size": np.concatenate([np.full(n_comm, size, np.int64), missing_i64]),
    }
    order = np.argsort(cols["start_ns"], kind="stable")
    return CpuActivities(**{k: v[order] for k, v in cols.items()})
