"""The arrays a Timeline draws for one step: lanes, activities per class, labels (pure numpy).

Times are µs relative to the step's earliest start over the chosen ranks, after each rank's
clock offset (metrics.md §6) is removed. Lanes are named by role (`stream 14 · NCCL · group 0`,
tpscope.export.lanes). When the view holds more than `max_activities` activities, those narrower
than one of AGG_BINS pixels are merged, per lane and class, into busy spans a pixel wide or more
(`TimelineData.aggregated` counts them); wider ones are drawn as they are. Nothing is left out.
On demand, the CPU threads that launched the view's activities get a row each with their outermost
CPU ops, merged the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tpscope.dashboards.hover import activity_info
from tpscope.export.lanes import lane_names
from tpscope.metrics import intervals
from tpscope.trace import ActivityClass, Run

CLASS_NAMES = {
    ActivityClass.COMPUTE: "compute",
    ActivityClass.COMM: "comm",
    ActivityClass.MEMORY: "memory",
    ActivityClass.FILLER: "filler",
}
LABEL_PREFIX = "tpscope/"
MAX_NAME_CHARS = 72
DEFAULT_MAX_ACTIVITIES = 10_000  # above this, activities narrower than a pixel are merged
AGG_BINS = 1600  # pixels across the plot the merging assumes (a wide screen's plot area)
CPU_KINDS = ("CPU op", "runtime call")  # the hover's second line on a CPU thread's op
LAUNCH_LANE = -3  # Lane.lane of a CPU thread's row (Lane.tid says which thread)


@dataclass(frozen=True, slots=True)
class Lane:
    """One row of the timeline: a GPU stream of a rank, or a row of its instrumentation labels."""

    y: int
    label: str
    rank: int
    lane: int  # row of RankTrace.lanes; -1, -2 for a labels row, LAUNCH_LANE for a CPU thread
    tid: int | None = None  # the CPU thread of a LAUNCH_LANE row


@dataclass(frozen=True, slots=True)
class Segments:
    """Intervals to draw on lanes: parallel arrays, µs relative to the step start."""

    start_us: np.ndarray
    end_us: np.ndarray
    y: np.ndarray
    text: np.ndarray  # object: the name to show on hover
    info: np.ndarray | None = None  # object: the hover's second line (hover.py), or None

    def __len__(self) -> int:
        return len(self.start_us)

    def take(self, m) -> Segments:
        return Segments(
            self.start_us[m],
            self.end_us[m],
            self.y[m],
            self.text[m],
            None if self.info is None else self.info[m],
        )


def concat_segments(parts: list[Segments]) -> Segments:
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_segments()
    info = None
    if any(p.info is not None for p in parts):
        info = np.concatenate(
            [p.info if p.info is not None else np.full(len(p), "", dtype=object) for p in parts]
        )
    return Segments(
        *(
            np.concatenate([getattr(p, f) for p in parts])
            for f in ("start_us", "end_us", "y", "text")
        ),
        info,
    )


def empty_segments() -> Segments:
    z = np.zeros(0)
    return Segments(z, z, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))


@dataclass(frozen=True, slots=True)
class TimelineData:
    """Everything the Timeline figure needs for one step and set of ranks."""

    step: int
    t0_ns: int
    step_us: tuple[float, float]  # the step's extent (relative µs) over the chosen ranks
    view_us: tuple[float, float]  # the part drawn (a zoomed window, or the whole step)
    lanes: list[Lane]
    activities: dict[str, Segments]  # by class name
    labels: Segments
    total: int  # activities in the view
    drawn: int  # segments drawn: activities, plus merged spans when aggregated
    lane_of: dict[tuple[int, int], int] = field(default_factory=dict)  # (rank, lane) -> y
    aggregated: int = 0  # activities narrower than a pixel merged into busy spans
    launches: Segments | None = (
        None  # CPU ops of the launching threads, on their (rank, thread) row
    )
    arrows: tuple[np.ndarray, np.ndarray] | None = (
        None  # launch end -> activity start, NaN-separated
    )
    thread_of: dict[tuple[int, int], int] = field(default_factory=dict)  # (rank, tid) -> y
    cpu_total: int = 0  # outermost CPU ops in the view on the thread rows
    cpu_aggregated: int = 0  # of those, merged into busy spans
    exposed: Segments | None = None  # the parts of comm activities no compute on the rank hides

    @property
    def capped(self) -> bool:
        return self.aggregated > 0


def short_names(symbols: tuple[str, ...]) -> np.ndarray:
    """Each symbol cut to MAX_NAME_CHARS (kernel names can be kilobytes of template)."""
    return np.array(
        [s if len(s) <= MAX_NAME_CHARS else s[: MAX_NAME_CHARS - 1] + "…" for s in symbols],
        dtype=object,
    )


def _label_rows(symbols: tuple[str, ...]) -> np.ndarray:
    """Per symbol: 0 an op label, 1 a chunk label, -1 not a label to draw."""
    names = list(symbols)
    ours = any(s.startswith(LABEL_PREFIX) for s in names)
    rows = np.full(len(names), -1, dtype=np.int8)
    for i, s in enumerate(names):  # once per distinct name, not per event
        if s.startswith("ProfilerStep#"):
            continue
        if ours and not s.startswith(LABEL_PREFIX):
            continue
        if not ours and s.lower().startswith("nccl:"):
            continue
        rows[i] = 1 if "/chunk" in s else 0
    return rows


def label_ranges(r) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The instrumentation labels of one rank on the GPU: start, end, name id, row (0 op, 1 chunk).

    Kineto puts a `gpu_user_annotation` over the kernels a `record_function` launched; where a
    trace has none for our labels (some ops launch outside what it tracks), a CPU label's GPU span
    is that of the GPU activities whose launch call started inside it (as metrics.md §3 does
    for steps).
    """
    a = r.annotations
    rows = _label_rows(r.symbols)
    lab_rows = rows[a.name_id] if len(a) else np.zeros(0, dtype=np.int8)
    on_gpu = a.on_gpu & (lab_rows >= 0)
    if on_gpu.any():
        return a.start_ns[on_gpu], a.end_ns[on_gpu], a.name_id[on_gpu], lab_rows[on_gpu]
    cpu = ~a.on_gpu & (lab_rows >= 0)
    g = r.gpu
    launched = np.flatnonzero(g.launch_start_ns >= 0)
    if not cpu.any() or len(launched) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z.astype(np.int32), z.astype(np.int8)
    order = launched[np.argsort(g.launch_start_ns[launched], kind="stable")]
    launch = g.launch_start_ns[order]
    big = np.iinfo(np.int64).max
    # a sentinel: every [lo, hi) below is a valid reduceat pair
    starts = np.append(g.start_ns[order], big)
    ends = np.append(g.end_ns[order], -big)
    lo = np.searchsorted(launch, a.start_ns[cpu], "left")
    hi = np.searchsorted(launch, a.end_ns[cpu], "right")
    pairs = np.column_stack([lo, hi]).ravel()
    first = np.minimum.reduceat(starts, pairs)[0::2]  # over [lo, hi) where lo < hi
    last = np.maximum.reduceat(ends, pairs)[0::2]
    some = hi > lo
    return first[some], last[some], a.name_id[cpu][some], lab_rows[cpu][some]


def step_extent_ns(
    run: Run, step: int, ranks: list[int], offsets_ns: dict[int, int]
) -> tuple[int, int] | None:
    """Earliest start and latest end of step `step` over `ranks` (aligned clocks)."""
    lo, hi = None, None
    for r in run.ranks:
        if r.rank not in ranks:
            continue
        m = r.steps.step == step
        if not m.any():
            continue
        off = offsets_ns.get(r.rank, 0)
        s, e = int(r.steps.start_ns[m].min()) - off, int(r.steps.end_ns[m].max()) - off
        lo = s if lo is None else min(lo, s)
        hi = e if hi is None else max(hi, e)
    return None if lo is None else (lo, hi)


def _window_ns(us: float, fallback_ns: int) -> int:
    """A window edge (µs from the step's start, from a URL or a zoom) in ns, held within ±2^62 ns:
    ±1e308 µs is the whole step, never an overflow; NaN is `fallback_ns`."""
    if us != us:
        return fallback_ns
    return int(max(-(2.0**62), min(2.0**62, us * 1000.0)))


def timeline_data(
    run: Run,
    step: int,
    ranks: list[int],
    window_us: tuple[float, float] | None = None,
    offsets_us: dict[int, float] | None = None,
    max_activities: int = DEFAULT_MAX_ACTIVITIES,
    launches: bool = False,
) -> TimelineData | None:
    """The activities of `step` on `ranks`, optionally only those inside `window_us`; with
    `launches`, one row per (rank, CPU thread) that launched an activity of the view, holding that
    thread's outermost CPU ops in the view (`thread_ops`), and an arrow from each launch call's end
    on its thread row to the activity it launched (when neither side is merged)."""
    offsets_ns = {
        int(k): int(round(v * 1000)) for k, v in (offsets_us or {}).items() if v is not None
    }
    extent = step_extent_ns(run, step, ranks, offsets_ns)
    if extent is None:
        return None
    t0, t1 = extent
    vlo, vhi = t0, t1
    if window_us is not None:
        vlo = max(t0, t0 + _window_ns(window_us[0], t0 - t1))
        vhi = min(t1, t0 + _window_ns(window_us[1], t1 - t0))
        if vhi <= vlo:
            vlo, vhi = t0, t1
    lanes: list[Lane] = []
    lane_of: dict[tuple[int, int], int] = {}
    thread_of: dict[tuple[int, int], int] = {}
    parts: list[tuple] = []
    label_parts: list[tuple] = []
    launch_parts: list[tuple] = []
    cpu_parts: list[tuple] = []
    exposed_parts: list[tuple] = []
    for r in run.ranks:
        if r.rank not in ranks:
            continue
        off = offsets_ns.get(r.rank, 0)
        g = r.gpu
        start, end = g.start_ns - off, g.end_ns - off
        in_step = (start < t1) & (end > t0)
        a_start, a_end, a_name, lab_rows = label_ranges(r)
        a_start, a_end = a_start - off, a_end - off
        lab_in_step = (a_start < t1) & (a_end > t0)
        for level, title in ((0, "labels"), (1, "chunks")):
            if (lab_in_step & (lab_rows == level)).any():
                lane_of[(r.rank, -1 - level)] = len(lanes)
                lanes.append(Lane(len(lanes), f"rank {r.rank} · {title}", r.rank, -1 - level))
        m = (start < vhi) & (end > vlo)
        names = short_names(r.symbols)
        if launches:
            tids = np.unique(g.launch_tid[m & (g.launch_start_ns >= 0)]).tolist()
            for tid in tids:
                thread_of[(r.rank, tid)] = len(lanes)
                title = f"CPU thread {tid}" if tid >= 0 else "CPU launch calls"
                lanes.append(Lane(len(lanes), f"rank {r.rank} · {title}", r.rank, LAUNCH_LANE, tid))
            if tids:
                cpu_parts.append(
                    thread_ops(
                        r, tids, off, vlo, vhi, {t: thread_of[(r.rank, t)] for t in tids}, names
                    )
                )
        used = np.unique(g.lane[in_step])
        order = sorted(used.tolist(), key=lambda k: (int(r.lanes[k][0]), int(r.lanes[k][1])))
        role_names = lane_names(r)
        for k in order:
            lane_of[(r.rank, k)] = len(lanes)
            lanes.append(Lane(len(lanes), f"rank {r.rank} · {role_names[k]}", r.rank, k))
        if m.any():
            lut = np.array(
                [lane_of.get((r.rank, k), -1) for k in range(len(r.lanes))], dtype=np.int64
            )
            for k, es, ee in exposed_intervals(start, end, g.cls, g.lane, m):
                exposed_parts.append(
                    (np.maximum(es, vlo), np.minimum(ee, vhi), np.full(len(es), lut[k], np.int64))
                )
            rows = np.flatnonzero(m)
            parts.append(
                (
                    start[m],
                    end[m],
                    lut[g.lane[m]],
                    names[g.name_id[m]],
                    g.cls[m],
                    activity_info(r, rows),
                )
            )
            if launches:
                lr = rows[g.launch_start_ns[rows] >= 0]
                thread_y = np.array(
                    [thread_of[(r.rank, t)] for t in g.launch_tid[lr].tolist()], dtype=np.int64
                )
                launch_parts.append(
                    (
                        np.maximum(g.launch_end_ns[lr], g.launch_start_ns[lr]) - off,
                        thread_y,
                        start[lr],
                        lut[g.lane[lr]],
                    )
                )
        lm = lab_in_step & (a_start < vhi) & (a_end > vlo)
        if lm.any():
            label_y = np.where(
                lab_rows[lm] == 1, lane_of.get((r.rank, -2), -1), lane_of.get((r.rank, -1), -1)
            )
            text = np.array(
                [s[len(LABEL_PREFIX) :] if s.startswith(LABEL_PREFIX) else s for s in r.symbols],
                dtype=object,
            )
            label_parts.append((a_start[lm], a_end[lm], label_y, text[a_name[lm]]))
    data = _assemble(step, t0, t1, vlo, vhi, lanes, lane_of, parts, label_parts, max_activities)
    if exposed_parts:
        es, ee, ey = (np.concatenate(c) for c in zip(*exposed_parts))
        if data.capped:  # as the activities: parts less than a pixel apart drawn as one
            es, ee, ey = _join_close(es, ee, ey, (vhi - vlo) / AGG_BINS)
        data = replace(
            data,
            exposed=Segments(
                (es - t0) / 1000.0,
                (ee - t0) / 1000.0,
                ey,
                np.full(len(es), "exposed: no compute on this rank beside it", dtype=object),
            ),
        )
    if not launches:
        return data
    ops, cpu_total, cpu_aggregated = _thread_segments(
        cpu_parts, t0, vlo, vhi, len(lanes), max_activities
    )
    data = replace(
        data, launches=ops, thread_of=thread_of, cpu_total=cpu_total, cpu_aggregated=cpu_aggregated
    )
    if launch_parts and not data.capped and not cpu_aggregated:
        le, ly, ks, ky = (np.concatenate(c) for c in zip(*launch_parts))
        x = np.full(3 * len(le), np.nan)
        yy = np.full(3 * len(le), np.nan)
        x[0::3], x[1::3] = (le - t0) / 1000.0, (ks - t0) / 1000.0
        yy[0::3], yy[1::3] = ly, ky
        data = replace(data, arrows=(x, yy))
    return data


def thread_ops(
    r, tids: list[int], off: int, vlo: int, vhi: int, y_of: dict[int, int], names: np.ndarray
):
    """The outermost CPU ops (`cpu_ops` and runtime calls together) of threads `tids` of rank `r`
    among those overlapping [vlo, vhi) (aligned ns): an op inside an earlier-starting op of its
    thread is left out. (start_ns, end_ns, y, name id, kind (index into CPU_KINDS), tid, the
    rank's names) in time order per thread."""
    calls = (r.cpu_ops, r.runtime)  # CPU_KINDS' order
    start = np.concatenate([c.start_ns for c in calls]) - off
    end = np.concatenate([np.maximum(c.end_ns, c.start_ns) for c in calls]) - off
    name = np.concatenate([c.name_id for c in calls])
    tid = np.concatenate([c.tid for c in calls])
    kind = np.concatenate([np.full(len(c), k, dtype=np.int8) for k, c in enumerate(calls)])
    keep = np.isin(tid, tids) & (start < vhi) & (end > vlo)
    start, end, name, tid, kind = (a[keep] for a in (start, end, name, tid, kind))
    order = np.lexsort((-end, start, tid))  # per thread, by start; the longer first on a tie
    start, end, name, tid, kind = (a[order] for a in (start, end, name, tid, kind))
    outer = np.ones(len(start), dtype=bool)
    for t in np.unique(tid).tolist():  # once per thread
        rows = np.flatnonzero(tid == t)
        reach = np.maximum.accumulate(end[rows])
        outer[rows[1:]] = end[rows[1:]] > reach[:-1]  # ends after every earlier op: not nested
    start, end, name, tid, kind = (a[outer] for a in (start, end, name, tid, kind))
    y = np.zeros(len(tid), dtype=np.int64)
    for t, row in y_of.items():  # once per thread
        y[tid == t] = row
    return start, end, y, name, kind, tid, names


def _thread_segments(cpu_parts, t0, vlo, vhi, n_lanes, max_activities) -> tuple[Segments, int, int]:
    """The thread rows' ops as Segments; above `max_activities`, those narrower than a pixel merged
    per row into busy spans (merge_narrow, as the GPU lanes)."""
    if not cpu_parts:
        return empty_segments(), 0, 0
    total = sum(len(p[0]) for p in cpu_parts)
    merged = []
    if total > max_activities:
        narrow = [(p[1] - p[0]) * AGG_BINS < (vhi - vlo) for p in cpu_parts]
        start, end, y = (
            np.concatenate([p[k][m] for p, m in zip(cpu_parts, narrow)]) for k in range(3)
        )
        merged = merge_narrow(start, end, y, np.zeros(len(start), np.int8), vlo, vhi, n_lanes)
        cpu_parts = [tuple(a[~m] for a in p[:6]) + (p[6],) for p, m in zip(cpu_parts, narrow)]
    kinds = np.array(CPU_KINDS, dtype=object)
    start, end, y, text, info = [], [], [], [], []
    for (
        s_,
        e_,
        y_,
        name,
        kind,
        tid,
        names,
    ) in cpu_parts:  # the names only of what is drawn one by one
        start.append(s_)
        end.append(e_)
        y.append(y_)
        text.append(names[name] if len(name) else np.zeros(0, dtype=object))
        info.append(
            np.array(
                [f"{k} · thread {t}" for k, t in zip(kinds[kind].tolist(), tid.tolist())],
                dtype=object,
            )
        )
    start, end, y, text, info = (np.concatenate(a) for a in (start, end, y, text, info))
    seg = Segments((start - t0) / 1000.0, (end - t0) / 1000.0, y, text, info)
    if len(merged):
        k = len(merged[0])
        seg = concat_segments(
            [
                seg,
                Segments(
                    (merged[0] - t0) / 1000.0,
                    (merged[1] - t0) / 1000.0,
                    merged[2],
                    np.char.replace(merged[3].astype(str), "activities", "CPU ops").astype(object),
                    np.full(k, "merged: zoom in to see each", dtype=object),
                ),
            ]
        )
    return seg, int(total), int(total - len(start))


def _join_close(start, end, y, gap_ns: float):
    """Intervals on each row joined where the gap between them is under `gap_ns` (vectorized)."""
    order = np.lexsort((start, y))
    start, end, y = start[order], end[order], y[order]
    if not len(start):
        return start, end, y
    # rows laid end to end on one axis, far apart, so that one running maximum serves every row
    lo = int(start.min())
    room = int(end.max()) - lo + int(gap_ns) + 1
    row = np.unique(y, return_inverse=True)[1].astype(np.int64) * room
    reach = np.maximum.accumulate(end - lo + row)
    new = np.ones(len(start), bool)
    new[1:] = (y[1:] != y[:-1]) | (start[1:] - lo + row[1:] - reach[:-1] >= gap_ns)
    first = np.flatnonzero(new)
    return start[first], np.maximum.reduceat(end, first), y[first]


def exposed_intervals(start, end, cls, lane, m) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Per lane holding communication among the rows `m`: the parts of its comm activities that no
    compute activity of the rank (any lane) overlaps, metrics.md §4's exposed communication, as
    (lane, starts, ends) in the times given. One interval-algebra pass per comm lane."""
    compute = m & (cls == ActivityClass.COMPUTE)
    cover = intervals.union(start[compute], end[compute])
    out = []
    comm = m & (cls == ActivityClass.COMM)
    for k in np.unique(lane[comm]).tolist():  # once per comm lane
        mine = comm & (lane == k)
        s, e = intervals.difference(intervals.union(start[mine], end[mine]), cover)
        if len(s):
            out.append((int(k), s, e))
    return out


def _assemble(
    step, t0, t1, vlo, vhi, lanes, lane_of, parts, label_parts, max_activities
) -> TimelineData:
    if parts:
        start, end, y, text, cls, info = (np.concatenate(c) for c in zip(*parts))
    else:
        start = end = np.zeros(0, dtype=np.int64)
        y, text, cls = (
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=object),
            np.zeros(0, dtype=np.int8),
        )
        info = np.zeros(0, dtype=object)
    total = len(start)
    merged = None
    if total > max_activities:
        narrow = (end - start) * AGG_BINS < (vhi - vlo)
        merged = merge_narrow(
            start[narrow], end[narrow], y[narrow], cls[narrow], vlo, vhi, len(lanes)
        )
        start, end, y, text, cls, info = (a[~narrow] for a in (start, end, y, text, cls, info))
    activities = {}
    for c, name in CLASS_NAMES.items():
        m = cls == c
        seg = Segments((start[m] - t0) / 1000.0, (end[m] - t0) / 1000.0, y[m], text[m], info[m])
        if merged is not None:
            mm = merged[4] == c
            seg = concat_segments(
                [
                    seg,
                    Segments(
                        (merged[0][mm] - t0) / 1000.0,
                        (merged[1][mm] - t0) / 1000.0,
                        merged[2][mm],
                        merged[3][mm],
                        np.full(int(mm.sum()), "merged: zoom in to see each", dtype=object),
                    ),
                ]
            )
        activities[name] = seg
    if label_parts:
        ls, le, ly, lt = (np.concatenate(c) for c in zip(*label_parts))
        labels = Segments((ls - t0) / 1000.0, (le - t0) / 1000.0, ly, lt)
    else:
        labels = empty_segments()
    return TimelineData(
        step=step,
        t0_ns=int(t0),
        step_us=(0.0, (t1 - t0) / 1000.0),
        view_us=((vlo - t0) / 1000.0, (vhi - t0) / 1000.0),
        lanes=lanes,
        activities=activities,
        labels=labels,
        total=int(total),
        drawn=int(sum(len(a) for a in activities.values())),
        lane_of=lane_of,
        aggregated=int(total - len(start)),
    )


def merge_narrow(start, end, y, cls, vlo: int, vhi: int, n_lanes: int):
    """Activities narrower than a pixel (AGG_BINS across [vlo, vhi)) merged, per lane and class,
    into spans of consecutive busy pixels: (start_ns, end_ns, y, text, cls), text `N activities`.
    A pixel is busy where an activity starts or ends in it."""
    n_cls = len(CLASS_NAMES)
    width = (vhi - vlo) / AGG_BINS
    b0 = np.clip(((start - vlo) / width).astype(np.int64), 0, AGG_BINS - 1)
    b1 = np.clip(((end - vlo) / width).astype(np.int64), 0, AGG_BINS - 1)
    block = (np.maximum(y, 0) * n_cls + cls.astype(np.int64)) * AGG_BINS
    size = max(n_lanes, 1) * n_cls * AGG_BINS
    count = np.bincount(block + b0, minlength=size)  # activities by the pixel they start in
    busy = (count + np.bincount(block + b1, minlength=size)) > 0
    pixel = np.arange(size) % AGG_BINS
    prev = np.concatenate([[False], busy[:-1]]) & (pixel > 0)
    nxt = np.concatenate([busy[1:], [False]]) & (pixel < AGG_BINS - 1)
    first, last = np.flatnonzero(busy & ~prev), np.flatnonzero(busy & ~nxt)
    total = np.concatenate([[0], np.cumsum(count)])
    n = total[last + 1] - total[first]
    text = np.array([f"{k:,} activities" for k in n.tolist()], dtype=object)  # one per merged span
    return (
        vlo + (first % AGG_BINS) * width,
        vlo + (last % AGG_BINS + 1) * width,
        first // (n_cls * AGG_BINS),
        text,
        (first // AGG_BINS) % n_cls,
    )


def relative_us(t_ns: np.ndarray, data: TimelineData) -> np.ndarray:
    """Absolute ns (aligned) to the timeline's relative µs."""
    return (np.asarray(t_ns, dtype=np.int64) - data.t0_ns) / 1000.0


def lane_rows(data: TimelineData, rank: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """The timeline row (y) of each (rank, lane) pair; -1 where that lane is not drawn."""
    y = np.full(len(rank), -1, dtype=np.int64)
    for r in np.unique(rank).tolist():  # once per rank
        lanes = [k for (rr, k) in data.lane_of if rr == r and k >= 0]
        if not lanes:
            continue
        lut = np.full(max(lanes) + 1, -1, dtype=np.int64)
        for k in lanes:
            lut[k] = data.lane_of[(r, k)]
        m = (rank == r) & (lane >= 0) & (lane < len(lut))
        y[m] = lut[lane[m]]
    return y


def overlay_rows(data: TimelineData, overlay) -> np.ndarray:
    """The timeline row (y) of each of an overlay's intervals: its (rank, lane)'s, or for a CPU
    thread's interval (lane LAUNCH_LANE, `tid`) that thread's row when CPU threads are shown;
    -1 where it is not drawn."""
    y = lane_rows(data, overlay.rank, overlay.lane)
    if getattr(overlay, "tid", None) is not None and data.thread_of:
        cpu = np.flatnonzero(overlay.lane == LAUNCH_LANE)
        y[cpu] = [
            data.thread_of.get((r, t), -1)
            for r, t in zip(overlay.rank[cpu].tolist(), overlay.tid[cpu].tolist())
        ]
    return y


def overlay_segments(data: TimelineData, overlay) -> Segments:
    """An overlay's intervals (aligned ns on (rank, lane), or a CPU thread's) on the drawn rows,
    clipped to the view."""
    if overlay is None or len(overlay) == 0:
        return empty_segments()
    y = overlay_rows(data, overlay)
    start, end = relative_us(overlay.start_ns, data), relative_us(overlay.end_ns, data)
    keep = (y >= 0) & (end > data.view_us[0]) & (start < data.view_us[1]) & (end > start)
    return Segments(start[keep], end[keep], y[keep], overlay.text[keep])


def link_arrays(data: TimelineData, members) -> tuple[np.ndarray, np.ndarray]:
    """One polyline per collective instance through its kernels' starts, NaN between instances."""
    if members is None or len(members) == 0:
        return np.zeros(0), np.zeros(0)
    y = lane_rows(data, members.rank, members.lane).astype(float)
    x = relative_us(members.start_ns, data)
    keep = y >= 0
    x, y, group = x[keep], y[keep], members.group[keep]
    if len(x) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.lexsort((y, group))
    x, y, group = x[order], y[order], group[order]
    breaks = np.flatnonzero(np.diff(group)) + 1
    return np.insert(x, breaks, np.nan), np.insert(y, breaks, np.nan)


def path_arrays(data: TimelineData, path) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """The critical path as a polyline along each segment's lane, jumping between lanes; its CPU
    segments on their thread's row when the CPU threads are shown; broken (NaN) where it passes
    through ranks, threads or times not drawn. customdata: (start, duration) per point, text: the
    segment's kind."""
    if path is None or len(path) == 0:
        return np.zeros(0), np.zeros(0), np.zeros((0, 2)), []
    y = overlay_rows(data, path)
    start, end = relative_us(path.start_ns, data), relative_us(path.end_ns, data)
    keep = np.flatnonzero(
        (y >= 0) & (end > data.view_us[0]) & (start < data.view_us[1]) & (end > start)
    )
    if len(keep) == 0:
        return np.zeros(0), np.zeros(0), np.zeros((0, 2)), []
    x = np.column_stack([start[keep], end[keep]]).ravel()
    yy = np.repeat(y[keep].astype(float), 2)
    custom = np.column_stack([np.repeat(start[keep], 2), np.repeat(end[keep] - start[keep], 2)])
    text = np.repeat(path.text[keep], 2)
    # a hidden part of the path between two kept ones
    breaks = 2 * (np.flatnonzero(np.diff(keep) > 1) + 1)
    x, yy = np.insert(x, breaks, np.nan), np.insert(yy, breaks, np.nan)
    custom = np.insert(custom, breaks, np.nan, axis=0)
    text = np.insert(text, breaks, "")
    return x, yy, custom, text.tolist()
