"""GPU time per step by kernel name and by collective shape: what a run spends its steps on.

The step windows partition each rank's timeline (metrics.md §3): a GPU activity counts its time in
each window it overlaps (split at a window's edge, so no time counts twice), and counts once, in
the window that holds its midpoint; time outside every window is left out. Figures are means per
rank and step, so that runs with different numbers of ranks or steps compare.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from tpscope.metrics import intervals as iv
from tpscope.numbers import size_text
from tpscope.trace import ActivityClass, RankTrace, Run
from tpscope.trace.columns import lookup, unique_rows

NS_PER_US = 1000.0

# Element sizes of the dtypes that torch writes into collective metadata (`dtype` arg).
DTYPE_BYTES: dict[str, int] = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Long": 8,
    "Int": 4,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
}
# metrics.md §5: the message size of all-gathers is the output, of every other collective the input.
GATHER_NAMES = ("allgather", "all_gather")


@dataclass(frozen=True, slots=True)
class KernelTime:
    """One kernel name (or collective shape) of a run: time and count per rank and step."""

    key: str  # the kernel name, or "collective bytes" for a collective shape
    activity_class: str  # compute, comm, memory or filler
    us_per_step: float  # mean over rank-steps of the summed (clipped) duration
    count_per_step: float  # mean over rank-steps of the number of activities
    us_by_step: tuple[float, ...]  # per step (ascending step number), mean over ranks
    collective: str | None = None
    bytes: int | None = None
    detail: str | None = None  # e.g. "4 x 8 MiB" per step, for a collective merged over sizes


def _step_index(rank: RankTrace) -> np.ndarray:
    """Row -> index of the step window holding the activity's midpoint (-1: none)."""
    g, w = rank.gpu, rank.steps
    if len(g) == 0 or len(w) == 0:
        return np.full(len(g), -1, dtype=np.int64)
    return iv.containing(w.start_ns, w.end_ns, g.start_ns + (g.end_ns - g.start_ns) // 2)


def _window_pieces(rank: RankTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The part of each activity inside each step window it overlaps, for windows that partition
    the timeline (metrics.md §3): (activity row, window index, ns) per piece, no loop."""
    g, w = rank.gpu, rank.steps
    if len(g) == 0 or len(w) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    order = np.argsort(w.start_ns, kind="stable")
    ws, we = w.start_ns[order], w.end_ns[order]  # disjoint: both ascending
    k0 = np.searchsorted(we, g.start_ns, side="right")  # the first window ending after the start
    n = np.maximum(np.searchsorted(ws, g.end_ns, side="left") - k0, 0)
    rows = np.repeat(np.arange(len(g)), n)
    k = k0[rows] + np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n)
    ns = np.minimum(g.end_ns[rows], we[k]) - np.maximum(g.start_ns[rows], ws[k])
    keep = ns > 0
    return rows[keep], order[k[keep]], ns[keep]


def _group_keys(rank: RankTrace, keep: np.ndarray, by: str) -> tuple[np.ndarray, list[str]]:
    """Per kept activity, its group (an index into the returned labels); grouping on integer ids,
    so that strings are built once per group, never per activity."""
    g, sy = rank.gpu, rank.symbols
    if by == "collective":
        coll, dtype = g.coll_name_id[keep], g.dtype_id[keep]
        size = np.array([DTYPE_BYTES.get(sy[d], 0) if d >= 0 else 0 for d in range(-1, len(sy))])[
            dtype + 1
        ]
        gather_ids = [i for i, s in enumerate(sy) if any(n in s.lower() for n in GATHER_NAMES)]
        nelems = np.where(np.isin(coll, gather_ids), g.out_nelems[keep], g.in_nelems[keep])
        nbytes = np.where(size > 0, nelems * size, -1)
        cols = np.stack(
            [np.full(len(coll), int(ActivityClass.COMM)), coll.astype(np.int64), nbytes], axis=1
        )
    elif by == "shape":
        shape_ids, shapes = _shapes(rank)
        cols = np.stack([g.cls[keep].astype(np.int64), shape_ids[keep]], axis=1)
        sy = tuple(shapes)
    else:
        ids = g.signature_id if by == "signature" else g.name_id
        cols = np.stack([g.cls[keep].astype(np.int64), ids[keep].astype(np.int64)], axis=1)
    if len(cols) == 0:
        return np.zeros(0, dtype=np.int64), []
    uniq, group = unique_rows(*cols.T)
    labels = [
        f"{row[0]}|{sy[row[1]]}" + (f"|{row[2]}" if by == "collective" else "") for row in uniq
    ]
    return group, labels


def _shapes(rank: RankTrace) -> tuple[np.ndarray, list[str]]:
    """Per activity: its shape (metrics.md §9), an index into the returned strings: the CPU op that
    launched it and that op's input dims (`aten::mm [M, 8192] [8192, 28672]`), so that a
    renamed kernel variant doing the same work keeps its shape; the kernel name when the op is
    unknown. Built once per distinct (op, signature, name), never per activity."""
    g, sy = rank.gpu, rank.symbols
    ops = rank.cpu_ops
    op = (
        lookup(ops.external_id, ops.name_id.astype(np.int64), g.external_id)
        if len(ops)
        else np.full(len(g), -1)
    )
    rows = np.stack(
        [op.astype(np.int64), g.signature_id.astype(np.int64), g.name_id.astype(np.int64)], axis=1
    )
    if len(rows) == 0:
        return np.zeros(0, np.int64), []
    uniq, inverse = unique_rows(*rows.T)
    strings: dict[str, int] = {}
    ids = np.empty(len(uniq), np.int64)
    for k, (o, sig, name) in enumerate(uniq.tolist()):
        dims = _rows_as_m(sy[sig].rpartition("|dims=")[2]) if sig >= 0 else ""
        text = f"{sy[o]} {dims}".strip() if o >= 0 else sy[name]
        ids[k] = strings.setdefault(text, len(strings))
    return ids[inverse.reshape(-1)], list(strings)


def _rows_as_m(dims_text: str, operands: int = 2) -> str:
    """`[[1024, 8192], [8192, 4096], [1024, 4096]]` -> `[M, 8192] [8192, 4096]`: the dims of the
    op's first `operands` inputs (a GEMM's two; an `out=` tensor left out), the first input's row
    count written M, so that a GEMM cut into row chunks keeps the shape of the whole
    (metrics.md §9); a list of tensors is written `[N tensors]`."""
    try:
        inputs = json.loads(dims_text) if dims_text else []
    except ValueError:
        return dims_text
    if not isinstance(inputs, list):
        return dims_text
    kept = [d for d in inputs if isinstance(d, list) and d][:operands]
    out = []
    for k, d in enumerate(kept):
        if all(isinstance(x, int) for x in d):
            out.append(
                "[" + ", ".join("M" if k == 0 and i == 0 else str(x) for i, x in enumerate(d)) + "]"
            )
        else:
            out.append(f"[{len(d)} tensors]")
    return " ".join(out)


def kernel_names(run: Run) -> dict[str, tuple[str, ...]]:
    """Per shape label (`kernel_times(run, "shape")`'s keys): the kernel names that ran it, most
    time first; once per distinct (shape, name) pair of each rank."""
    time_of: dict[str, dict[str, int]] = {}
    for rank in run.ranks:
        g = rank.gpu
        if len(g) == 0:
            continue
        shape_ids, shapes = _shapes(rank)
        uniq, inverse = unique_rows(shape_ids, g.name_id)
        dur = np.bincount(
            inverse, weights=(g.end_ns - g.start_ns).astype(float), minlength=len(uniq)
        )
        for (shape, name), d in zip(uniq.tolist(), dur.tolist()):
            names = time_of.setdefault(shapes[shape], {})
            names[rank.symbols[name]] = names.get(rank.symbols[name], 0) + d
    return {k: tuple(sorted(v, key=lambda n: -v[n])) for k, v in time_of.items()}


def kernel_times(
    run: Run, by: str = "name", leave_out_first_step: bool = False
) -> tuple[KernelTime, ...]:
    """GPU time per rank and step of every kernel name (`by="name"`), kernel signature
    (`"signature"`: name|grid|block|input dims), kernel shape (`"shape"`: launching op and its
    input dims, whatever the kernel's name) or collective shape (`"collective"`), most first;
    with `leave_out_first_step`, over the steps after the first profiled one (metrics.md §3)."""
    if by not in ("name", "signature", "shape", "collective"):
        raise ValueError(f"by must be name, signature, shape or collective, not {by!r}")
    steps = sorted({int(s) for r in run.ranks for s in r.steps.step.tolist()})
    if leave_out_first_step and len(steps) > 1:
        steps = steps[1:]
    n_rank_steps = sum(int(np.isin(r.steps.step, steps).sum()) for r in run.ranks)
    if not steps or n_rank_steps == 0:
        return ()
    step_pos = {s: i for i, s in enumerate(steps)}
    ranks_per_step = np.zeros(len(steps))
    parts = []
    for rank in run.ranks:  # a loop over ranks, not events
        global_step = np.array(
            [step_pos.get(int(s), -1) for s in rank.steps.step.tolist()], dtype=np.int64
        )
        mid = _step_index(rank)
        counted = np.flatnonzero(mid >= 0)
        counted = counted[global_step[mid[counted]] >= 0]
        rows, window, ns = _window_pieces(rank)
        timed = global_step[window] >= 0
        rows, window, ns = rows[timed], window[timed], ns[timed]
        keep = np.zeros(len(rank.gpu), bool)
        keep[counted] = True
        keep[rows] = True
        if by == "collective":
            keep &= rank.gpu.coll_name_id >= 0
        group, labels = _group_keys(rank, keep, by)
        at = np.full(len(keep), -1, np.int64)
        at[keep] = np.arange(int(keep.sum()))
        ranks_per_step[global_step[global_step >= 0]] += 1
        counted, timed = counted[keep[counted]], keep[rows]
        parts.append(
            (
                np.asarray(labels, dtype=object),
                group[at[rows[timed]]],
                global_step[window[timed]],
                ns[timed],
                group[at[counted]],
            )
        )
    # object arrays: a fixed-width str array pads every label to the longest (a 64 MiB name, GiBs)
    all_labels = np.array(sorted({str(lab) for p in parts for lab in p[0].tolist()}), dtype=object)
    if len(all_labels) == 0:
        return ()
    total_ns = np.zeros((len(all_labels), len(steps)))
    count = np.zeros(len(all_labels))
    for labels, group, gstep, dur, counted in parts:
        if len(labels) == 0:
            continue
        row_of = np.searchsorted(
            all_labels, np.array([str(lab) for lab in labels.tolist()], dtype=object)
        )
        np.add.at(total_ns, (row_of[group], gstep), dur)
        np.add.at(count, row_of[counted], 1)
    by_step_us = total_ns / np.maximum(ranks_per_step, 1) / NS_PER_US
    mean_us = total_ns.sum(axis=1) / n_rank_steps / NS_PER_US
    out = [
        _kernel_time(str(lab), mean_us[i], count[i] / n_rank_steps, by_step_us[i], by)
        for i, lab in enumerate(all_labels)
    ]
    return tuple(sorted(out, key=lambda k: (-k.us_per_step, k.key)))


def _kernel_time(label: str, us: float, count: float, by_step: np.ndarray, by: str) -> KernelTime:
    cls_text, _, key = label.partition("|")
    cls = ActivityClass(int(cls_text)).name.lower()
    if by != "collective":
        return KernelTime(key, cls, float(us), float(count), tuple(float(v) for v in by_step))
    name, _, nbytes = key.rpartition("|")
    b = int(nbytes)
    shown = f"{name} {size_text(b)}" if b >= 0 else f"{name} (size unknown)"
    return KernelTime(
        shown,
        cls,
        float(us),
        float(count),
        tuple(float(v) for v in by_step),
        collective=name,
        bytes=b if b >= 0 else None,
    )


def by_collective(times: tuple[KernelTime, ...]) -> tuple[KernelTime, ...]:
    """Collective shapes (`kernel_times(run, "collective")`) merged per collective name, so that runs
    that split a message into chunks compare; `detail` lists the messages per rank and step."""
    names = sorted({t.collective for t in times if t.collective})
    out = []
    for name in names:  # a loop over collective names
        parts = [t for t in times if t.collective == name]
        by_step = np.sum([t.us_by_step for t in parts], axis=0)
        detail = " + ".join(
            f"{t.count_per_step:g} x {size_text(t.bytes) if t.bytes else '?'}"
            for t in sorted(parts, key=lambda t: -(t.bytes or 0))
        )
        out.append(
            KernelTime(
                name,
                "comm",
                float(sum(t.us_per_step for t in parts)),
                float(sum(t.count_per_step for t in parts)),
                tuple(float(v) for v in by_step),
                collective=name,
                detail=detail,
            )
        )
    return tuple(sorted(out, key=lambda k: (-k.us_per_step, k.key)))
