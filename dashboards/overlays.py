"""Per-activity results the Timeline draws over the lanes, from `tpscope.metrics.per_activity`.

Which kernels belong to one collective instance, how long each waited, and which activities a
step's critical path visits come from the metrics (metrics.md §5-§7), and each GEMM's shape from
`tpscope.metrics.gemm` (§8): the same functions `analyze_run` calls. Nothing is matched, walked or
parsed here: this module only puts their rows on the timeline's (rank, lane) coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpscope.dashboards.timeline_data import LAUNCH_LANE
from tpscope.metrics.activities import run_activities
from tpscope.metrics.critical_path import segment_names
from tpscope.metrics.gemm import GemmFinder
from tpscope.metrics.per_activity import PATH_KINDS, ActivityDetail, path_segments
from tpscope.trace import Run

KIND_NAMES = PATH_KINDS


@dataclass(frozen=True, slots=True)
class Overlay:
    """Parallel arrays of intervals on (rank, lane), aligned ns; `group` ties rows together."""

    rank: np.ndarray
    lane: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    group: np.ndarray  # collective instance, or the path's order
    text: np.ndarray  # object
    tid: np.ndarray | None = None  # the CPU thread of a row on lane LAUNCH_LANE (a CPU thread row)
    name: np.ndarray | None = None  # object: a path segment's name (metrics.md §7)

    def __len__(self) -> int:
        return len(self.rank)

    def take(self, rows) -> Overlay:
        return Overlay(
            *(None if getattr(self, f) is None else getattr(self, f)[rows] for f in self.__slots__)
        )


def _empty_overlay() -> Overlay:
    return Overlay(*(np.zeros(0, np.int64) for _ in range(5)), np.zeros(0, dtype=object))


def _member_rows(x: ActivityDetail, step: int) -> np.ndarray:
    rows = np.flatnonzero((x.instance >= 0) & (x.step == step))
    return rows[np.lexsort((x.rank[rows], x.instance[rows]))]


def collective_members(x: ActivityDetail, step: int) -> Overlay:
    """Every rank's kernel of each matched instance of `step`, ordered by instance then rank."""
    rows = _member_rows(x, step)
    return Overlay(
        x.rank[rows],
        x.lane[rows],
        x.start_ns[rows],
        x.end_ns[rows],
        x.instance[rows],
        np.full(len(rows), "collective", dtype=object),
    )


def wait_parts(x: ActivityDetail, step: int) -> Overlay:
    """The waiting part [start, start + wait] of each member kernel of `step` that waited (§5)."""
    rows = _member_rows(x, step)
    rows = rows[x.wait_ns[rows] > 0]
    return Overlay(
        x.rank[rows],
        x.lane[rows],
        x.start_ns[rows],
        x.start_ns[rows] + x.wait_ns[rows],
        x.instance[rows],
        np.full(len(rows), "waiting for the last rank to arrive", dtype=object),
    )


def arrival_us(members: Overlay) -> np.ndarray:
    """Per member: its start after the first member of its instance started (µs)."""
    if len(members) == 0:
        return np.zeros(0)
    first = np.full(int(members.group.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(first, members.group, members.start_ns)
    return (members.start_ns - first[members.group]) / 1000.0


def critical_path(x: ActivityDetail, step: int) -> Overlay:
    """The segments of `step`'s critical path in time order: a GPU segment on the lane of its
    activity, a CPU segment (row -1) on lane LAUNCH_LANE with the thread of its call (`tid`), which
    the Timeline draws on that thread's row when it shows CPU threads; each with its kind (`text`)
    and its name as `analyze --json` gives it (`name`)."""
    seg = path_segments(x, step)
    if len(seg.row) == 0:
        return _empty_overlay()
    gpu = seg.row >= 0
    row = np.where(gpu, seg.row, 0)
    rank_of_pos = np.full(
        int(max(x.graph.rank_pos.max(initial=0), seg.rank_pos.max(initial=0))) + 1, -1, np.int64
    )
    # rank_pos: the rank's place in the run, as the path graph counts
    rank_of_pos[x.graph.rank_pos] = x.rank
    tid = np.where(gpu, -1, x.graph.call_threads(seg))
    rank = np.where(gpu, x.rank[row], rank_of_pos[seg.rank_pos])
    lane = np.where(gpu, x.lane[row], LAUNCH_LANE)
    kinds = np.array(KIND_NAMES, dtype=object)[seg.category]
    names = segment_names(seg, x.graph.acts, x.graph)
    return Overlay(rank, lane, seg.start_ns, seg.end_ns, np.arange(len(seg.row)), kinds, tid, names)


def gemm_shape_labels(run: Run) -> np.ndarray:
    """Per GPU activity of the run (the rows of `ActivityDetail`): its GEMM shape's label as the
    Contention tab names it (`1024×14336×8192 BFloat16`, metrics.md §8), "" for no GEMM. The shapes
    are a `tpscope.metrics.gemm.GemmFinder`'s, the ones `analyze_run` groups GEMMs by, found in
    the pass that reads each rank once."""
    found = GemmFinder()
    acts = run_activities(run, lambda _pos, r, first_row: found.add(r, first_row))
    gemms = found.finish()
    out = np.full(len(acts), "", dtype=object)
    if len(gemms):
        out[gemms.act] = np.array([s.label for s in gemms.shapes], dtype=object)[gemms.shape]
    return out
