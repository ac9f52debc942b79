"""Collective instances across ranks: matching, wait and transfer, skew, bytes, bandwidth (metrics.md §5).

Everything works on the run-wide activity table (`activities.RunActivities`), so that matching
and timing are a few sorts and grouped reductions, never a loop over events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tpscope.metrics.activities import NS_PER_US, RunActivities
from tpscope.trace import ActivityClass
from tpscope.trace.classify import Rule, comm_rule
from tpscope.trace.columns import unique_rows

_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max

# metrics.md §5: which message size counts as the collective's bytes, and nccl-tests' bus-bandwidth
# factor for a group of n ranks (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md).
BUSBW_TABLE: dict[str, tuple[str, Callable[[int], float]]] = {
    "all_gather": ("out", lambda n: (n - 1) / n),
    "reduce_scatter": ("in", lambda n: (n - 1) / n),
    "all_reduce": ("in", lambda n: 2 * (n - 1) / n),
    "all_to_all": ("in", lambda n: (n - 1) / n),
    "broadcast": ("in", lambda n: 1.0),
    "reduce": ("in", lambda n: 1.0),
    "send_recv": ("in", lambda n: 1.0),
}
_KIND_PATTERNS = (  # first match wins, on the lower-case name without '_'
    ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
)
DTYPE_BYTES: dict[str, int] = {
    "bfloat16": 2,
    "half": 2,
    "float16": 2,
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "short": 2,
    "int16": 2,
    "byte": 1,
    "uint8": 1,
    "char": 1,
    "int8": 1,
    "bool": 1,
    "complexfloat": 8,
    "complexdouble": 16,
}


def collective_kind(name: str) -> str | None:
    """`_allgather_base`, `all_gather_into_tensor`, `allgather` ... -> `all_gather` (None if unknown)."""
    bare = name.lower().replace("_", "")
    for pattern, kind in _KIND_PATTERNS:
        if pattern in bare:
            return kind
    return None


def dtype_bytes(dtype: str) -> int | None:
    """Bytes per element of a trace's dtype name (`BFloat16`, `Float`, `Float8_e4m3fn` ...)."""
    lower = dtype.lower()
    if lower.startswith("float8"):
        return 1
    return DTYPE_BYTES.get(lower)


def busbw_factor(kind: str | None, n: int) -> float | None:
    if kind is None or n < 1 or kind not in BUSBW_TABLE:
        return None
    return BUSBW_TABLE[kind][1](n)


def group_ranks(label: str) -> tuple[int, ...] | None:
    """ "3 [0,2]" -> (0, 2); None when the ranks are unknown ("3 []")."""
    inside = label[label.rfind("[") + 1 : -1] if label.endswith("]") else ""
    return tuple(int(x) for x in inside.split(",")) if inside else None


@dataclass(frozen=True, slots=True)
class CollectiveMatch:
    """Which activity belongs to which collective instance (metrics.md §5). Point-to-point pairs
    (and the rings of `batch_isend_irecv` kernels they link) are instances too, named `send_recv`."""

    instance: np.ndarray  # per RunActivities row: instance id, -1 when unmatched
    step: np.ndarray  # per instance
    key: tuple[str, ...]  # per instance
    collective: tuple[str, ...]  # per instance: the trace's name (`_allgather_base`)
    bytes: np.ndarray  # per instance, -1 when the dtype or kind is unknown
    group_size: np.ndarray  # per instance: the Group size, else the number of matched ranks
    by_seq: bool
    warnings: tuple[str, ...]
    group: tuple[str, ...] = ()  # per instance: "pg [ranks] description"; "" when inferred
    # per instance: by order alone
    inferred: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    @property
    def n_instances(self) -> int:
        return len(self.step)


@dataclass(frozen=True, slots=True)
class _Part:
    """Matched instances of one family (collectives, inferred, point-to-point), ids local to it."""

    rows: np.ndarray
    inst: np.ndarray  # per row, local instance id (-1: left unmatched)
    step: np.ndarray
    key: list[str]
    collective: list[str]
    bytes: np.ndarray
    group_size: np.ndarray
    group: list[str]
    inferred: bool


def _group_starts(*cols: np.ndarray) -> np.ndarray:
    """Boolean mask: row i starts a new group of equal `cols` (rows already sorted by them)."""
    n = len(cols[0])
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = np.any(np.stack([c[1:] != c[:-1] for c in cols]), axis=0)
    return new


def _ordinals(*cols: np.ndarray, by: np.ndarray) -> np.ndarray:
    """k-th occurrence (0-based, in `by` order) of each row within its group of equal `cols`."""
    order = np.lexsort((by, *reversed(cols)))
    new = _group_starts(*(c[order] for c in cols))
    first = np.maximum.accumulate(np.where(new, np.arange(len(order)), 0))
    k = np.empty(len(order), np.int64)
    k[order] = np.arange(len(order)) - first
    return k


def _per_string(ids: np.ndarray, strings: tuple[str, ...], rule, default) -> dict:
    """`rule(strings[id])` for each distinct id (default for -1), as a dict id -> value."""
    return {i: (rule(strings[i]) if i >= 0 else default) for i in np.unique(ids).tolist()}


def _broadcast(ids: np.ndarray, values: dict, dtype) -> np.ndarray:
    """values[id] per row, looked up once per distinct id."""
    if len(ids) == 0:
        return np.zeros(0, dtype)
    uniq, inverse = np.unique(ids, return_inverse=True)
    return np.array([values[u] for u in uniq.tolist()], dtype)[inverse.reshape(-1)]


def _instance_bytes(acts: RunActivities, rows: np.ndarray) -> np.ndarray:
    out = np.full(len(rows), -1, np.int64)
    kinds: dict[int, str | None] = {}
    for i, r in enumerate(rows.tolist()):  # one per instance
        c = int(acts.coll[r])
        kind = kinds[c] if c in kinds else kinds.setdefault(c, collective_kind(acts.strings[c]))
        size = dtype_bytes(acts.strings[acts.dtype[r]]) if acts.dtype[r] >= 0 else None
        if kind is None or size is None:
            continue
        nelems = acts.out_nelems[r] if BUSBW_TABLE[kind][0] == "out" else acts.in_nelems[r]
        if nelems >= 0:
            out[i] = int(nelems) * size
    return out


def _group_label(acts: RunActivities, row: int) -> str:
    g, d = int(acts.group[row]), int(acts.pg_desc[row])
    desc = acts.strings[d] if d >= 0 and acts.strings[d] != "undefined" else ""
    return " ".join(x for x in (acts.strings[g] if g >= 0 else "", desc) if x)


def _validate(acts: RunActivities, idx: np.ndarray, keys: np.ndarray, checked: tuple[str, ...]):
    """Instances of `keys` (one row per kernel): (uniq keys, inverse, good mask, first row, bad field,
    lonely mask, members), the §5 validation: fields agree, one kernel per rank, two ranks or more."""
    uniq, inst = unique_rows(*keys.T)
    n = len(uniq)
    pos = acts.rank_pos[idx]
    bad_field = np.full(n, -1, np.int64)  # index into _CHECKED of the first field that differs
    for f, name in enumerate(checked):
        col = getattr(acts, name)[idx]
        lo = np.full(n, _I64_MAX, np.int64)
        hi = np.full(n, _I64_MIN, np.int64)
        np.minimum.at(lo, inst, col)
        np.maximum.at(hi, inst, col)
        bad_field = np.where((bad_field < 0) & (lo != hi), f, bad_field)
    members = np.bincount(inst, minlength=n)
    distinct = np.bincount(unique_rows(inst, pos)[0][:, 0], minlength=n)
    bad_field = np.where((bad_field < 0) & (distinct != members), len(_CHECKED), bad_field)
    first_row = np.full(n, _I64_MAX, np.int64)
    np.minimum.at(first_row, inst, idx)
    # a lone rank of a one-rank world: each of its collectives is an instance of its own (wait 0);
    # a kernel seen on one rank of a larger world (its folder, its world size or its group) is not
    # matched (metrics.md §5)
    larger = len(acts.rank_ids) > 1 or any(w is not None and w > 1 for w in acts.world_sizes)
    lonely = (members < 2) & (bad_field < 0) & (larger | (acts.group_size[first_row] > 1))
    good = (bad_field < 0) & ~lonely
    return uniq, inst, good, first_row, bad_field, lonely, members


def _part(
    acts: RunActivities,
    idx: np.ndarray,
    inst: np.ndarray,
    good: np.ndarray,
    first_row: np.ndarray,
    keys: list[str],
    collective: list[str],
    nbytes: np.ndarray,
    size: np.ndarray,
    group: list[str],
    inferred: bool,
) -> _Part:
    new_id = np.cumsum(good) - 1
    step = np.full(len(good), _I64_MAX, np.int64)
    np.minimum.at(step, inst, acts.step[idx])
    sel = np.flatnonzero(good).tolist()
    return _Part(
        idx,
        np.where(good[inst], new_id[inst], -1),
        step[good],
        [keys[i] for i in sel],
        [collective[i] for i in sel],
        nbytes[good],
        size[good],
        [group[i] for i in sel],
        inferred,
    )


def _described(acts: RunActivities, idx: np.ndarray, warnings: list[str]) -> tuple[_Part, bool]:
    """Kernels with collective metadata: instances keyed by (group, Seq) when every kernel carries
    Seq, else (step, group, name, ordinal); a group is (name, ranks) (metrics.md §5)."""
    pos, step, grp, coll = acts.rank_pos[idx], acts.step[idx], acts.group[idx], acts.coll[idx]
    by_seq = bool(len(idx)) and bool((acts.seq[idx] >= 0).all())
    if by_seq:
        keys = np.stack([grp, acts.seq[idx]], axis=1)
    else:
        k = _ordinals(pos, step, grp, coll, by=acts.start_ns[idx])
        keys = np.stack([step, grp, coll, k], axis=1)
    uniq, inst, good, first_row, bad_field, lonely, members = _validate(acts, idx, keys, _CHECKED)
    s = acts.strings
    if by_seq:
        key = [f"{s[acts.pg[r]]}#{q}" for r, q in zip(first_row.tolist(), uniq[:, 1].tolist())]
    else:
        key = [
            f"{s[acts.pg[r]]}/{s[c]}/{kk}"
            for r, (_, _, c, kk) in zip(first_row.tolist(), uniq.tolist())
        ]
    warnings.extend(_match_warnings(acts, uniq, first_row, bad_field, lonely, by_seq))
    rows = np.minimum(first_row, len(acts) - 1)
    size = acts.group_size[rows]
    return _part(
        acts,
        idx,
        inst,
        good,
        first_row,
        key,
        [s[c] for c in acts.coll[rows].tolist()],
        _instance_bytes(acts, rows),
        np.where(size >= 1, size, members),
        [_group_label(acts, r) for r in rows.tolist()],
        False,
    ), by_seq


def _inferred(acts: RunActivities, idx: np.ndarray, kind_of: dict[int, str | None]) -> _Part:
    """Kernels without metadata (older traces): the k-th kernel of one collective kind and size on
    each rank within a step is one instance (metrics.md §5 "Inferred"). Sizes (the launching op's
    input dims) are compared for every kind but all-to-all and send/recv, whose sizes differ by rank."""
    kinds = sorted({k for k in kind_of.values() if k})
    op_kind = _per_string(acts.op[idx], acts.strings, collective_kind, None)
    kinds = sorted(set(kinds) | {k for k in op_kind.values() if k})
    kind_id = _broadcast(
        acts.name[idx], {n: kinds.index(k) if k else -1 for n, k in kind_of.items()}, np.int64
    )
    by_op = _broadcast(
        acts.op[idx], {o: kinds.index(k) if k else -1 for o, k in op_kind.items()}, np.int64
    )
    # the c10d op says all-to-all where NCCL says SendRecv
    kind_id = np.where(by_op >= 0, by_op, kind_id)
    dims_of = _per_string(
        acts.signature[idx], acts.strings, lambda sig: sig.rpartition("|dims=")[2], ""
    )
    dims_table: dict[str, int] = {}
    dims = _broadcast(
        acts.signature[idx],
        {g: dims_table.setdefault(d, len(dims_table)) for g, d in dims_of.items()},
        np.int64,
    )
    uneven = np.isin(kind_id, [kinds.index(k) for k in ("all_to_all", "send_recv") if k in kinds])
    dims = np.where(uneven, -1, dims)
    step, pos = acts.step[idx], acts.rank_pos[idx]
    k = _ordinals(pos, step, kind_id, dims, by=acts.start_ns[idx])
    keys = np.stack([step, kind_id, dims, k], axis=1)
    uniq, inst, good, first_row, _, _, members = _validate(acts, idx, keys, ())
    key = [f"inferred/{kinds[c]}/{kk}" for _, c, _, kk in uniq.tolist()]
    return _part(
        acts,
        idx,
        inst,
        good,
        first_row,
        key,
        [kinds[c] for c in uniq[:, 1].tolist()],
        np.full(len(uniq), -1, np.int64),
        members,
        ["" for _ in key],
        True,
    )


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected components of n nodes joined by edges (a, b): the smallest node id of each."""
    label = np.arange(n, dtype=np.int64)
    while True:
        m = np.minimum(label[a], label[b])
        before = label.copy()
        np.minimum.at(label, a, m)
        np.minimum.at(label, b, m)
        label = label[label]
        if np.array_equal(label, before):
            return label


def _point_to_point(acts: RunActivities, idx: np.ndarray, warnings: list[str]) -> _Part:
    """metrics.md §5 "Point-to-point": the k-th send from rank a to rank b in a step pairs with the
    k-th receive of b from a in that step (same group); kernels linked by pairs are one instance."""
    parsed = _per_string(
        acts.p2p[idx],
        acts.strings,
        lambda t: [(tok[0] == "s", int(tok[1:])) for tok in t.split()],
        [],
    )
    counts = np.array([len(parsed[p]) for p in acts.p2p[idx].tolist()], np.int64)
    tok_row = np.repeat(idx, counts)
    flat = [t for p in acts.p2p[idx].tolist() for t in parsed[p]]  # one per send/recv of a kernel
    is_send = np.array([t[0] for t in flat], bool)
    peer = np.array([t[1] for t in flat], np.int64)
    me = acts.rank[tok_row]
    src, dst = np.where(is_send, me, peer), np.where(is_send, peer, me)
    step, grp = acts.step[tok_row], acts.group[tok_row]
    k = _ordinals(me, step, grp, is_send.astype(np.int64), peer, by=acts.start_ns[tok_row])
    keys = np.stack([step, grp, src, dst, k], axis=1)
    order = np.lexsort(keys.T[::-1])
    ks = keys[order]
    start = _group_starts(*ks.T)
    gid = np.cumsum(start) - 1
    n_keys = int(gid[-1]) + 1 if len(gid) else 0
    sends = np.bincount(gid, weights=is_send[order], minlength=n_keys)
    sizes = np.bincount(gid, minlength=n_keys)
    paired = (sends == 1) & (sizes == 2)
    first = np.flatnonzero(start)
    ok = first[paired[gid[first]]]
    local = {int(r): i for i, r in enumerate(idx.tolist())}
    a = np.array([local[int(r)] for r in tok_row[order][ok].tolist()], np.int64)
    b = np.array([local[int(r)] for r in tok_row[order][ok + 1].tolist()], np.int64)
    unpaired = int((~paired).sum())
    if unpaired:
        j = int(first[~paired[gid[first]]][0])
        warnings.append(
            f"{unpaired} send/recv(s) have no counterpart (first: step {ks[j][0]} rank {ks[j][2]} -> "
            f"rank {ks[j][3]} #{ks[j][4]}); counted as transfer (metrics.md §5)"
        )
    label = _components(len(idx), a, b)
    in_pair = np.zeros(len(idx), bool)
    in_pair[a] = True
    in_pair[b] = True
    comp, inst = np.unique(np.where(in_pair, label, -1), return_inverse=True)
    inst = inst.reshape(-1) - (1 if (comp < 0).any() else 0)
    n = int(inst.max()) + 1 if len(inst) else 0
    first_row = np.full(n, _I64_MAX, np.int64)
    np.minimum.at(first_row, inst[inst >= 0], idx[inst >= 0])
    ranks = [[] for _ in range(n)]
    for i, r in zip(inst.tolist(), acts.rank[idx].tolist()):  # one per point-to-point kernel
        if i >= 0:
            ranks[i].append(r)
    sel = inst >= 0
    nbytes = np.zeros(n, np.int64)
    np.add.at(nbytes, inst[sel], dtype_bytes_of(acts, idx)[sel])
    step = np.full(n, _I64_MAX, np.int64)
    np.minimum.at(step, inst[sel], acts.step[idx][sel])
    base = [
        f"{acts.strings[acts.pg[r]]}/send_recv/{'-'.join(map(str, sorted(set(rk))))}"
        for r, rk in zip(first_row.tolist(), ranks)
    ]
    seen: dict[tuple[int, str], int] = {}
    key = []
    # one per instance: the k-th exchange among these ranks in the step
    for st, b in zip(step.tolist(), base):
        k_of = seen[(st, b)] = seen.get((st, b), -1) + 1
        key.append(f"{b}/{k_of}")
    return _Part(
        idx,
        inst,
        step,
        key,
        ["send_recv"] * n,
        np.where(nbytes > 0, nbytes, -1),
        np.array([len(set(r)) for r in ranks], np.int64),
        [_group_label(acts, r) for r in first_row.tolist()],
        False,
    )


def dtype_bytes_of(acts: RunActivities, idx: np.ndarray) -> np.ndarray:
    """Per row: In msg nelems times the dtype's size (0 when either is unknown)."""
    size_of = _per_string(acts.dtype[idx], acts.strings, lambda d: dtype_bytes(d) or 0, 0)
    size = np.array([size_of[d] for d in acts.dtype[idx].tolist()], np.int64)
    return np.where(acts.in_nelems[idx] > 0, acts.in_nelems[idx], 0) * size


def match_collectives(acts: RunActivities) -> CollectiveMatch:
    """metrics.md §5: collectives within their process group, send/recv pairs, and (for kernels
    without metadata) instances inferred from each rank's order of kernels."""
    comm = (acts.cls == ActivityClass.COMM) & (acts.step >= 0)
    crow = np.flatnonzero(comm)  # what follows reads these rows only
    names, colls, p2p_ids = acts.name[crow], acts.coll[crow], acts.p2p[crow]
    kind_of = _per_string(
        names, acts.strings, lambda n: (comm_rule(n) or _NO_RULE).collective, None
    )
    coll_kind = _per_string(colls, acts.strings, collective_kind, None)
    is_p2p_name = _broadcast(colls, {c: k == "send_recv" for c, k in coll_kind.items()}, bool)
    warnings: list[str] = list(acts.notes)
    parts: list[_Part] = []
    described = crow[(colls >= 0) & (p2p_ids < 0) & ~is_p2p_name]
    by_seq = False
    if len(described):
        part, by_seq = _described(acts, described, warnings)
        parts.append(part)
    p2p = crow[p2p_ids >= 0]
    if len(p2p):
        parts.append(_point_to_point(acts, p2p, warnings))
    known = _broadcast(names, {n: k is not None for n, k in kind_of.items()}, bool)
    bare = crow[(colls < 0) & (p2p_ids < 0) & ~acts.sync[crow] & known]
    if len(bare) and len(acts.rank_ids) > 1:
        parts.append(_inferred(acts, bare, kind_of))
    instance = np.full(len(acts), -1, np.int64)
    offset = 0
    for part in parts:
        instance[part.rows] = np.where(part.inst >= 0, part.inst + offset, -1)
        offset += len(part.step)
    warnings.extend(_group_warnings(acts, np.concatenate([described, p2p])))
    if offset == 0 and comm.any():
        warnings.append(_why_nothing_matched(acts, comm))
    return CollectiveMatch(
        instance=instance,
        step=np.concatenate([p.step for p in parts]) if parts else np.zeros(0, np.int64),
        key=tuple(k for p in parts for k in p.key),
        collective=tuple(c for p in parts for c in p.collective),
        bytes=np.concatenate([p.bytes for p in parts]) if parts else np.zeros(0, np.int64),
        group_size=np.concatenate([p.group_size for p in parts])
        if parts
        else np.zeros(0, np.int64),
        by_seq=by_seq,
        warnings=tuple(warnings),
        group=tuple(g for p in parts for g in p.group),
        inferred=np.concatenate([np.full(len(p.step), p.inferred) for p in parts])
        if parts
        else np.zeros(0, bool),
    )


_NO_RULE = Rule(ActivityClass.COMPUTE, ())


def _group_warnings(acts: RunActivities, rows: np.ndarray) -> list[str]:
    """Process groups whose members are missing from the folder (metrics.md §5)."""
    present = set(acts.rank_ids)
    missing = []
    for g in np.unique(acts.group[rows]).tolist() if len(rows) else []:
        ranks = group_ranks(acts.strings[g]) if g >= 0 else None
        lack = sorted(set(ranks) - present) if ranks else []
        if lack:
            missing.append(f"{acts.strings[g]} lacks rank(s) {_ranges_text(lack)}")
    if not missing:
        return []
    shown = "; ".join(missing[:3]) + (f"; and {len(missing) - 3} more" if len(missing) > 3 else "")
    return [
        f"{len(missing)} process group(s) have members missing from the folder ({shown}): their "
        "collectives cannot be matched and count as transfer (metrics.md §5)"
    ]


def _ranges_text(ranks: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    out, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(f"{ranks[i]}-{ranks[j]}" if j > i else f"{ranks[i]}")
        i = j + 1
    return ", ".join(out)


def _why_nothing_matched(acts: RunActivities, comm: np.ndarray) -> str:
    n = int(comm.sum())
    if len(acts.rank_ids) == 1:
        size = acts.world_sizes[0]
        of = f" of world size {size}" if size else ""
        return (
            f"one rank{of} in the folder: its {n} communication activities cannot be matched without "
            "their peers' traces; all of their time counts as transfer (metrics.md §5)"
        )
    return (
        f"none of the {n} communication activities could be matched across ranks (no collective "
        "metadata and no kernel name that says which collective it is, or no counterpart on another "
        "rank); all of their time counts as transfer (metrics.md §5)"
    )


_CHECKED = ("coll", "dtype", "in_nelems", "out_nelems")
_CHECKED_LABEL = (
    "Collective name",
    "dtype",
    "In msg nelems",
    "Out msg nelems",
    "one kernel per rank",
)


def _match_warnings(
    acts: RunActivities,
    uniq: np.ndarray,
    first_row: np.ndarray,
    bad_field: np.ndarray,
    lonely: np.ndarray,
    by_seq: bool,
) -> tuple[str, ...]:
    out: list[str] = []

    def describe(i: int) -> str:
        r = int(first_row[i])
        name = acts.strings[acts.coll[r]]
        where = f"seq {uniq[i][1]}" if by_seq else f"step {uniq[i][0]} {name} #{uniq[i][3]}"
        return f"{where} on process group {_group_label(acts, r)!r}"

    bad = np.flatnonzero(bad_field >= 0)
    if len(bad):
        i = int(bad[0])
        out.append(
            f"{len(bad)} collective instance(s) do not match across ranks (first: {describe(i)}: "
            f"ranks disagree on {_CHECKED_LABEL[bad_field[i]]}); their kernels are left unmatched "
            "and counted as transfer (metrics.md §5)"
        )
    alone = np.flatnonzero(lonely)
    if len(alone) and len(acts.rank_ids) > 1:
        i = int(alone[0])
        out.append(
            f"{len(alone)} collective kernel(s) have no counterpart on another rank (first: rank "
            f"{acts.rank[first_row[i]]} {describe(i)}); counted as transfer (metrics.md §5)"
        )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CollectiveTiming:
    """Wait and transfer of every activity, and per-instance timing, on aligned clocks (§5, §6)."""

    # per activity (0 for non-comm and unmatched, but a sync kernel's whole time)
    wait_ns: np.ndarray
    transfer_ns: np.ndarray  # per activity (0 for non-comm)
    arrival_ns: np.ndarray  # per instance: the last member's start
    skew_ns: np.ndarray  # per instance
    transfer_span_ns: np.ndarray  # per instance: last end minus arrival
    binding: np.ndarray  # per instance: the activity row of the last to arrive


def collective_timing(
    acts: RunActivities, match: CollectiveMatch, offsets_ns: np.ndarray
) -> CollectiveTiming:
    """metrics.md §5: arrival = max s_r; wait_r = max(0, min(e_r, arrival) - s_r); transfer = dur - wait;
    an unmatched synchronization kernel is all wait."""
    n = match.n_instances
    inst = match.instance
    mem = np.flatnonzero(inst >= 0)
    mi = inst[mem]
    shift = offsets_ns[acts.rank_pos[mem]]
    s, e = acts.start_ns[mem] - shift, acts.end_ns[mem] - shift  # the members, aligned
    arrival = np.full(n, _I64_MIN, np.int64)
    first = np.full(n, _I64_MAX, np.int64)
    last_end = np.full(n, _I64_MIN, np.int64)
    np.maximum.at(arrival, mi, s)
    np.minimum.at(first, mi, s)
    np.maximum.at(last_end, mi, e)
    dur = acts.end_ns - acts.start_ns
    wait = np.zeros(len(acts), np.int64)
    wait[acts.sync] = dur[acts.sync]  # unmatched synchronization kernels: all wait
    wait[mem] = np.clip(np.minimum(e, arrival[mi]) - s, 0, None)
    transfer = dur
    transfer -= wait
    transfer[acts.cls != ActivityClass.COMM] = 0
    binding = np.full(n, -1, np.int64)
    if len(mem):
        # by instance, then start: the last of each is the binding one
        order = np.lexsort((s, mi))
        last = np.append(mi[order][1:] != mi[order][:-1], True)
        binding[mi[order][last]] = mem[order][last]
    return CollectiveTiming(
        wait, transfer, arrival, arrival - first, np.clip(last_end - arrival, 0, None), binding
    )


@dataclass(frozen=True, slots=True)
class CollectiveInstance:
    """One matched collective across ranks, in µs (metrics.md §5)."""

    step: int
    key: str
    collective: str
    bytes: int | None
    ranks: list[int]
    skew_us: float
    wait_us: float  # the longest wait of any rank
    transfer_us: float  # last end minus last arrival
    exposed_us: float  # the most kernel time any rank spends without compute beside it
    algbw_gbps: float | None
    busbw_gbps: float | None
    group: str = ""  # process group: "name [ranks] description" (empty when inferred)
    inferred: bool = False  # matched by each rank's order of kernels alone (no collective metadata)


def collective_instances(
    acts: RunActivities, match: CollectiveMatch, timing: CollectiveTiming, exposed: np.ndarray
) -> list[CollectiveInstance]:
    """The JSON rows of `collectives`, in step and key order."""
    n = match.n_instances
    if n == 0:
        return []
    mem = np.flatnonzero(match.instance >= 0)
    mi = match.instance[mem]
    max_wait = np.zeros(n, np.int64)
    max_exposed = np.zeros(n, np.int64)
    np.maximum.at(max_wait, mi, timing.wait_ns[mem])
    np.maximum.at(max_exposed, mi, exposed[mem])
    order = np.lexsort((acts.rank[mem], mi))
    ranks_sorted = acts.rank[mem][order].tolist()
    splits = np.flatnonzero(np.diff(mi[order])) + 1
    ranks_of = np.split(np.array(ranks_sorted, np.int64), splits)
    kinds = {name: collective_kind(name) for name in set(match.collective)}
    out = []
    for i in range(n):
        nbytes = int(match.bytes[i]) if match.bytes[i] >= 0 else None
        span = int(timing.transfer_span_ns[i])
        algbw = nbytes / span if nbytes is not None and span > 0 else None  # bytes/ns = GB/s
        factor = busbw_factor(kinds[match.collective[i]], int(match.group_size[i]))  # send/recv: 1
        out.append(
            CollectiveInstance(
                step=int(match.step[i]),
                key=match.key[i],
                collective=match.collective[i],
                bytes=nbytes,
                ranks=ranks_of[i].tolist(),
                skew_us=int(timing.skew_ns[i]) / NS_PER_US,
                wait_us=int(max_wait[i]) / NS_PER_US,
                transfer_us=span / NS_PER_US,
                exposed_us=int(max_exposed[i]) / NS_PER_US,
                algbw_gbps=algbw,
                busbw_gbps=algbw * factor if algbw is not None and factor is not None else None,
                group=match.group[i] if match.group else "",
                inferred=bool(match.inferred[i]),
            )
        )
    out.sort(key=lambda c: (c.step, c.key))
    return out
