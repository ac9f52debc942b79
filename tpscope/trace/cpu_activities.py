"""A CPU run's activities (metrics.md §1, "CPU runs"): when a rank has no GPU activity, its gloo
collectives and the ops that block a thread until a collective ends are its communication, the
self time of its other CPU ops (their time outside their child ops) its compute, each CPU thread
a lane.

The rows come back as plain columns; `assemble.py` turns them into the same `GpuActivities` table
a GPU run has, so every metric, the dashboard and the report work on it unchanged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from tpscope.trace.classify import ActivityClass
from tpscope.trace.columns import MISSING, SymbolTable, containing, unique_ids
from tpscope.trace.read.extract import RawColumns

# metrics.md §1: what a CPU-side event is, by the start of its name; first match wins.
COMM_RANGE_PREFIXES = ("gloo:",)  # CPU ranges that are one collective (gloo's worker threads)
# CPU ops that block their thread until a collective ends: communication, all of it wait (§5)
BLOCKING_WAITS = (
    "_c10d_functional::wait_tensor",
    "c10d_functional::wait_tensor",
    "c10d::wait",
)
# metrics.md §1: compute is the self time of operators, `namespace::name` (`aten::mm`,
# `mkldnn::...`, custom ops), but for these namespaces: collectives' issue calls, the autograd
# engine's and the profiler's own ops. Autograd nodes (`AddmmBackward0`), Python functions and
# annotations name no namespace: their own time is overhead, not compute.
OPERATOR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::[A-Za-z_][A-Za-z0-9_.]*$")
NOT_COMPUTE_NAMESPACES = frozenset(
    {"c10d", "_c10d_functional", "c10d_functional", "autograd", "profiler"}
)
# metrics.md §1: the kind of a gloo collective is what the op that issued it names (gloo runs a
# reduce-scatter as an all-reduce); lower-case substrings of the op's name without '_'
OP_KINDS = (
    ("reducescatter", "reduce_scatter"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
)
# per collective kind: output elements per input element, as a function of the group size
OUT_PER_IN = {"all_gather": lambda n: n, "reduce_scatter": lambda n: 1 / n}
PG_NAME = "gloo"  # the process group of a CPU run's collectives until metrics.md §5 names it
# c10d point-to-point ops: the position of the group-local peer in their `Concrete Inputs`
P2P_OPS = {"c10d::send": ("send", 2), "c10d::recv_": ("recv", 2)}
P2P_RANGES = {"gloo:send": "send", "gloo:recv": "recv"}  # gloo's ranges of a send / receive


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
    peer: np.ndarray  # int64: a send's or recv's group-local peer (-1 elsewhere)
    p2p_id: np.ndarray  # int32: "s1" / "r0", the peer of a send / recv (metrics.md §5)
    whole: np.ndarray  # bool: the row is a whole op or collective, not one stretch of an op

    def __len__(self) -> int:
        return len(self.start_ns)


def has_cpu_activity(raw: RawColumns) -> bool:
    """Whether a trace without GPU activity has CPU ops or gloo collectives to analyze instead."""
    return len(raw.groups["cpu_op"]["start_ns"]) > 0 or bool(_comm_rows(raw, raw.symbols).any())


def _starts_with(name_ids: np.ndarray, symbols: list[str], prefixes: tuple[str, ...]) -> np.ndarray:
    """Per row: whether its name starts with one of `prefixes` (each distinct name looked at once)."""
    if len(name_ids) == 0:
        return np.zeros(0, bool)
    uniq, inverse = unique_ids(name_ids)
    hit = np.fromiter(
        (u >= 0 and symbols[u].startswith(prefixes) for u in uniq.tolist()), bool, len(uniq)
    )
    return hit[inverse.ravel()]


def _is_compute(name_ids: np.ndarray, symbols: list[str]) -> np.ndarray:
    """Per op: whether its name is an OPERATOR outside NOT_COMPUTE_NAMESPACES (once per name)."""
    if len(name_ids) == 0:
        return np.zeros(0, bool)
    uniq, inverse = unique_ids(name_ids)

    def rule(u: int) -> bool:
        m = OPERATOR.match(symbols[u]) if u >= 0 else None
        return m is not None and m.group(1) not in NOT_COMPUTE_NAMESPACES

    hit = np.fromiter((rule(u) for u in uniq.tolist()), bool, len(uniq))
    return hit[inverse.ravel()]


def is_blocking_wait(name_ids: np.ndarray, symbols: tuple[str, ...] | list[str]) -> np.ndarray:
    """Whether each activity's name is a BLOCKING_WAITS op (each distinct name looked at once)."""
    return _starts_with(name_ids, symbols, BLOCKING_WAITS)  # type: ignore[arg-type]


def _comm_rows(raw: RawColumns, symbols: list[str]) -> np.ndarray:
    return _starts_with(raw.groups["cpu_range"]["name_id"], symbols, COMM_RANGE_PREFIXES)


def _parents(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Per op, the row of the op of its thread it is directly nested in (-1: none). The ops of a
    thread nest: sorted by (thread, start, longest first), an op's depth is the ops of its thread
    begun before it minus those of its thread ended by its start, and its parent the last op
    before it one level up (one `searchsorted` per nesting level, never a loop over ops)."""
    n = len(start)
    out = np.full(n, -1, np.int64)
    if n == 0:
        return out
    order = np.lexsort((-end, start, tid))
    s_start, s_end, s_tid = start[order], end[order], tid[order]
    thread = np.cumsum(np.r_[False, s_tid[1:] != s_tid[:-1]]).astype(np.int64)  # sorted by tid
    base = int(min(s_start.min(), s_end.min()))
    span = int(max(s_start.max(), s_end.max())) - base + 1
    k_start = thread * span + (s_start - base)
    k_ends = np.sort(thread * span + (s_end - base))
    thread_first = np.searchsorted(thread, thread, side="left")  # sorted by thread
    ended = np.searchsorted(k_ends, k_start, side="right") - np.searchsorted(
        k_ends, thread * span, side="left"
    )
    depth = np.maximum(np.arange(n) - thread_first - ended, 0)
    pos = np.arange(n)
    for d in range(1, int(depth.max()) + 1):
        up, here = pos[depth == d - 1], pos[depth == d]
        at = np.searchsorted(up, here) - 1
        parent = up[np.maximum(at, 0)]
        ok = (at >= 0) & (thread[parent] == thread[here])
        out[order[here[ok]]] = order[parent[ok]]
    return out


def self_pieces(
    start: np.ndarray, end: np.ndarray, tid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """metrics.md §1: each op's self time as pieces (row, piece start, piece end): its time
    outside its direct children (clipped to it); empty pieces and ops are left out. Vectorized:
    children sorted by (parent, start), the gaps between a running maximum of their ends and the
    next start."""
    timed = np.flatnonzero(end > start)
    parent = np.full(len(start), -1, np.int64)
    sub = _parents(start[timed], end[timed], tid[timed])
    parent[timed] = np.where(sub >= 0, timed[np.maximum(sub, 0)], -1)
    kids = np.flatnonzero(parent >= 0)
    kids = kids[np.lexsort((start[kids], parent[kids]))]
    p = parent[kids]
    c_start = np.clip(start[kids], start[p], end[p])
    c_end = np.clip(end[kids], start[p], end[p])
    new = np.ones(len(kids), bool)
    new[1:] = p[1:] != p[:-1]
    last = np.ones(len(kids), bool)
    last[:-1] = new[1:]
    group = np.cumsum(new) - 1
    base = int(start[timed].min()) if len(timed) else 0
    span = int(end[timed].max()) - base + 1 if len(timed) else 1
    # running maximum of the children's ends within each parent (offsets keep parents apart)
    covered = np.maximum.accumulate(group * span + (c_end - base)) - group * span + base
    before = np.empty(len(kids), np.int64)  # what the earlier children of its parent cover
    before[new] = start[p[new]]
    before[~new] = covered[np.flatnonzero(~new) - 1]
    has_kids = np.zeros(len(start), bool)
    has_kids[p] = True
    leaves = timed[~has_kids[timed]]
    rows = np.concatenate([p, p[last], leaves])
    lo = np.concatenate([np.maximum(before, start[p]), covered[last], start[leaves]])
    hi = np.concatenate([c_start, end[p[last]], end[leaves]])
    keep = hi > lo
    return rows[keep], lo[keep], hi[keep]


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


def _tensor_sizes(dims: list) -> list[int]:
    """The element counts of an op's tensor inputs (a TensorList's tensors one by one), in order."""
    out: list[int] = []
    for d in dims if isinstance(dims, list) else []:
        if isinstance(d, list) and d and all(isinstance(x, list) for x in d):
            out.extend(_tensor_sizes(d))
        elif isinstance(d, list) and d and all(isinstance(x, int) for x in d):
            out.append(_nelems(d))
    return out


def _op_kind(name: str) -> str | None:
    bare = name.lower().replace("_", "")
    return next((kind for sub, kind in OP_KINDS if sub in bare), None)


def _issuing_ops(
    raw: RawColumns, sym: list[str], c_start: np.ndarray, n_in: list
) -> tuple[list, list]:
    """metrics.md §1: per gloo collective, the kind its issuing `c10d::` op names (None where the
    op names none of OP_KINDS, or no op is found) and that op's first tensor's elements (its
    output, for an all-gather or reduce-scatter). The issuing op is the last `c10d::` op of the
    rank to start at or before the collective with a tensor of the collective's size."""
    ops = raw.groups["cpu_op"]
    is_c10d = _starts_with(ops["name_id"], sym, ("c10d::",))
    rows = np.flatnonzero(is_c10d)
    uniq, inverse = np.unique(ops["dims_id"][rows], return_inverse=True)
    sizes_of = []
    for u in uniq.tolist():
        try:
            sizes_of.append(_tensor_sizes(json.loads(sym[u])) if u >= 0 and sym[u] else [])
        except ValueError:
            sizes_of.append([])
    pairs = [
        (size, int(ops["start_ns"][r]), i)
        for i, (r, k) in enumerate(zip(rows.tolist(), inverse.ravel().tolist()))
        for size in set(sizes_of[k])
    ]  # one per tensor of an issuing op: a few per collective
    kinds: list = [None] * len(c_start)
    firsts: list = [None] * len(c_start)
    if not pairs:
        return kinds, firsts
    size, start, op = (np.array(c, np.int64) for c in zip(*pairs))
    want = np.array([x if x is not None else -2 for x in n_in], np.int64)
    # (size, start) as one sortable key: the size's dense index times the span of starts
    _, dense = np.unique(np.concatenate([size, want]), return_inverse=True)
    dense = dense.ravel().astype(np.int64)
    base = int(min(start.min(), c_start.min()))
    span = int(max(start.max(), c_start.max())) - base + 1
    key = dense[: len(size)] * span + (start - base)
    order = np.argsort(key, kind="stable")
    key, op = key[order], op[order]
    w = dense[len(size) :]
    at = np.searchsorted(key, w * span + (c_start - base), side="right") - 1
    lo = np.searchsorted(key, w * span, side="left")
    for i, j in enumerate(at.tolist()):
        if j >= lo[i]:
            r = int(rows[op[j]])
            kinds[i] = _op_kind(sym[int(ops["name_id"][r])])
            first = sizes_of[int(inverse.ravel()[op[j]])]
            firsts[i] = first[0] if first else None
    return kinds, firsts


def _p2p_peers(
    raw: RawColumns, sym: list[str], c_name: np.ndarray, c_start: np.ndarray, c_tid: np.ndarray
) -> np.ndarray:
    """metrics.md §5: per gloo collective, the group-local peer of a `gloo:send` / `gloo:recv`
    (-1 elsewhere): the `Concrete Inputs` of the last `c10d::send` / `c10d::recv_` op of its
    thread to start at or before it (gloo starts a send or receive once its op returns)."""
    out = np.full(len(c_name), MISSING, np.int64)
    ops = raw.groups["cpu_op"]
    direction = {sym.index(n): d for n, (d, _) in P2P_OPS.items() if n in sym}
    rows = np.flatnonzero(np.isin(ops["name_id"], list(direction)))
    mine = np.flatnonzero(np.isin(c_name, [i for i, n in enumerate(sym) if n in P2P_RANGES]))
    if len(rows) == 0 or len(mine) == 0 or "concrete_id" not in ops:
        return out
    # the peer of each distinct (op name, Concrete Inputs) text
    pairs, inverse = np.unique(
        np.stack([ops["name_id"][rows], ops["concrete_id"][rows]], axis=1),
        axis=0,
        return_inverse=True,
    )
    peers = []
    for name_id, text_id in pairs.tolist():
        try:
            values = json.loads(sym[text_id]) if text_id >= 0 and sym[text_id] else []
            peers.append(int(values[P2P_OPS[sym[name_id]][1]]))
        except (ValueError, TypeError, IndexError):
            peers.append(MISSING)
    op_peer = np.array(peers, np.int64)[inverse.ravel()]
    # (thread, direction) blocks, searched by start
    op_dir = np.array(
        [direction[int(n)] == "send" for n in ops["name_id"][rows].tolist()], np.int64
    )
    range_dir = np.array([P2P_RANGES[sym[int(n)]] == "send" for n in c_name[mine]], np.int64)
    keys = np.concatenate(
        [np.stack([ops["tid"][rows], op_dir], 1), np.stack([c_tid[mine], range_dir], 1)]
    )
    _, block = np.unique(keys, axis=0, return_inverse=True)
    block = block.ravel().astype(np.int64)
    starts = np.concatenate([ops["start_ns"][rows], c_start[mine]])
    base, span = int(starts.min()), int(starts.max() - starts.min()) + 1
    key = block * span + (starts - base)
    k_op, k_range = key[: len(rows)], key[len(rows) :]
    order = np.argsort(k_op, kind="stable")
    at = np.searchsorted(k_op[order], k_range, side="right") - 1
    ok = at >= 0
    at = np.maximum(at, 0)
    ok &= block[: len(rows)][order][at] == block[len(rows) :]
    out[mine[ok]] = op_peer[order][at[ok]]
    return out


def cpu_activities(raw: RawColumns, symbols: SymbolTable, group_size: int | None) -> CpuActivities:
    """The activities of a rank without GPU activity (see the module docstring). `group_size` is
    the world size of the trace's only process group, None when unknown."""
    sym = symbols.symbols
    ranges, ops = raw.groups["cpu_range"], raw.groups["cpu_op"]
    comm = np.flatnonzero(_comm_rows(raw, sym))
    c_start, c_end, c_tid = ranges["start_ns"][comm], ranges["end_ns"][comm], ranges["tid"][comm]
    waits = np.flatnonzero(_starts_with(ops["name_id"], sym, BLOCKING_WAITS))
    rows, p_start, p_end = self_pieces(ops["start_ns"], ops["end_ns"], ops["tid"])
    busy = _is_compute(ops["name_id"], sym) & ~_starts_with(ops["name_id"], sym, BLOCKING_WAITS)
    # an op inside a collective on the collective's thread is the collective's work; a send or
    # receive runs beside its thread's work (its range is the transfer's lifetime)
    held = ~np.isin(ranges["name_id"][comm], [i for i, n in enumerate(sym) if n in P2P_RANGES])
    keep = busy[rows] & ~_inside(p_start, ops["tid"][rows], c_start[held], c_end[held], c_tid[held])
    compute, p_start, p_end = rows[keep], p_start[keep], p_end[keep]

    c_name = ranges["name_id"][comm]
    n_in = _first_input(ranges["dims_id"][comm], sym, _nelems).tolist()
    dtype = _first_input(ranges["types_id"][comm], sym, str)
    op_kind, op_first = _issuing_ops(raw, sym, c_start, n_in)
    kinds = [k or sym[i][sym[i].find(":") + 1 :] for i, k in zip(c_name.tolist(), op_kind)]
    c_coll = np.array([symbols.id(f"gloo:{k}") for k in kinds], np.int32)
    size = group_size if group_size else MISSING
    n_out = [
        MISSING
        if x is None
        else first
        if k in OUT_PER_IN and first is not None
        else int(round(x * OUT_PER_IN[k](size)))
        if k in OUT_PER_IN and size > 0
        else MISSING
        if k in OUT_PER_IN
        else x
        for x, k, first in zip(n_in, kinds, op_first)
    ]
    peer = _p2p_peers(raw, sym, c_name, c_start, c_tid)
    p2p = [
        MISSING if p < 0 else symbols.id(f"{'s' if sym[n] == 'gloo:send' else 'r'}{p}")
        for p, n in zip(peer.tolist(), c_name.tolist())
    ]
    n_comm, n_wait, n_compute = len(comm), len(waits), len(compute)
    parts = (n_comm, n_wait, n_compute)

    def col(comm_values, wait_values, compute_values, dtype_):
        return np.concatenate([comm_values, wait_values, compute_values]).astype(dtype_)

    def missing(dtype_, *which):
        return [np.full(parts[i], MISSING, dtype_) for i in which]

    cols = {
        "start_ns": col(c_start, ops["start_ns"][waits], p_start, np.int64),
        "end_ns": col(c_end, ops["end_ns"][waits], p_end, np.int64),
        "name_id": col(c_name, ops["name_id"][waits], ops["name_id"][compute], np.int32),
        "cls": np.repeat(
            np.array([ActivityClass.COMM, ActivityClass.COMM, ActivityClass.COMPUTE], np.int8),
            parts,
        ),
        "tid": col(c_tid, ops["tid"][waits], ops["tid"][compute], np.int64),
        "external_id": col(
            *missing(np.int64, 0), ops["external_id"][waits], ops["external_id"][compute], np.int64
        ),
        "dims_id": col(
            ranges["dims_id"][comm], ops["dims_id"][waits], ops["dims_id"][compute], np.int32
        ),
        "coll_name_id": col(c_coll, *missing(np.int32, 1, 2), np.int32),
        "pg_name_id": col(
            np.full(n_comm, symbols.id(PG_NAME), np.int32), *missing(np.int32, 1, 2), np.int32
        ),
        "in_nelems": col(
            np.array([MISSING if x is None else x for x in n_in], np.int64),
            *missing(np.int64, 1, 2),
            np.int64,
        ),
        "out_nelems": col(np.array(n_out, np.int64), *missing(np.int64, 1, 2), np.int64),
        "dtype_id": col(
            np.array([MISSING if t is None else symbols.id(t) for t in dtype.tolist()], np.int32),
            *missing(np.int32, 1, 2),
            np.int32,
        ),
        "group_size": col(np.full(n_comm, size, np.int64), *missing(np.int64, 1, 2), np.int64),
        "peer": col(peer, *missing(np.int64, 1, 2), np.int64),
        "p2p_id": col(np.array(p2p, np.int32), *missing(np.int32, 1, 2), np.int32),
        "whole": col(
            np.ones(n_comm, bool),
            np.ones(n_wait, bool),
            (p_start == ops["start_ns"][compute]) & (p_end == ops["end_ns"][compute]),
            bool,
        ),
    }
    order = np.argsort(cols["start_ns"], kind="stable")
    return CpuActivities(**{k: v[order] for k, v in cols.items()})
