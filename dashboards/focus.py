"""Where a click lands on the Timeline: the window to zoom to and the activities to highlight.

A collective instance is found by its JSON `key` in the analyzer's per-activity matching
(`ActivityDetail.instance_key`, metrics.md §5); a kernel by its signature; a GEMM by its shape
(§8); a class by name. Times are the Timeline's: µs after the step's first activity over the chosen
ranks, clocks aligned (§6).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tpscope.dashboards.overlays import Overlay
from tpscope.dashboards.timeline_data import (
    CLASS_NAMES,
    LAUNCH_LANE,
    Segments,
    TimelineData,
    concat_segments,
    empty_segments,
    overlay_segments,
    short_names,
    step_extent_ns,
)

PAD_RATIO = 0.25  # each side of a zoomed-to instance, as a share of its span
MIN_PAD_US = 1.0


def _holds(names: np.ndarray, needle: str) -> np.ndarray:
    """Per name: whether it holds `needle` (lower case), ignoring case."""
    return np.char.find(np.char.lower(names.astype(str)), needle) >= 0


def _path_pieces(data: TimelineData, path: Overlay | None, needle: str) -> Segments:
    """The critical path's CPU segments whose names hold `needle`, on their threads' rows (drawn
    when the Timeline shows CPU threads), clipped to the view."""
    if path is None or path.name is None:
        return empty_segments()
    rows = np.flatnonzero((path.lane == LAUNCH_LANE) & _holds(path.name, needle))
    return overlay_segments(data, dataclasses.replace(path.take(rows), text=path.name[rows]))


def instance_rows(detail, step: int, key: str) -> np.ndarray:
    """Rows of `detail` (every rank's kernel) of the collective instance `key` in `step` (a key
    such as `0/_allgather_base/3` names the fourth such call of each step)."""
    keys = np.asarray(
        getattr(detail, "instance_key", ()) if detail is not None else (), dtype=object
    )
    named = np.flatnonzero(keys == key)
    if not len(named):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.isin(detail.instance, named) & (detail.step == step))


def collective_window(
    run, detail, step: int, ranks: list[int], offsets_us: dict, key: str
) -> list[float] | None:
    """The Timeline window (µs) around instance `key` on `ranks`, padded PAD_RATIO of its span
    each side; None when the instance is not on those ranks."""
    rows = instance_rows(detail, step, key)
    rows = rows[np.isin(detail.rank[rows], ranks)] if len(rows) else rows
    offsets_ns = {
        int(k): int(round(v * 1000)) for k, v in (offsets_us or {}).items() if v is not None
    }
    extent = step_extent_ns(run, step, ranks, offsets_ns)
    if not len(rows) or extent is None:
        return None
    lo = (int(detail.start_ns[rows].min()) - extent[0]) / 1000.0
    hi = (int(detail.end_ns[rows].max()) - extent[0]) / 1000.0
    pad = max(MIN_PAD_US, PAD_RATIO * (hi - lo))
    return [lo - pad, hi + pad]


def selected_segments(
    data: TimelineData,
    detail,
    selection: dict | None,
    gemm_shapes: np.ndarray | None = None,
    path: Overlay | None = None,
) -> Segments:
    """The drawn activities a selection names, as segments to outline on the Timeline;
    `gemm_shapes` (per row of `detail`, `overlays.gemm_shape_labels`) for a "gemm" selection. A
    "search" outlines the activities and the CPU threads' outermost ops whose names hold its text,
    and the CPU segments of the critical path (`path`, `overlays.critical_path`) named so: host
    time in an op nested in another, a runtime call or a user range, which no drawn op shows."""
    if not selection or data is None:
        return empty_segments()
    kind, key = selection.get("kind"), str(selection.get("key"))
    if kind == "gemm":  # every GEMM of that shape (metrics.md §8) on the drawn lanes and view
        if detail is None or gemm_shapes is None or len(gemm_shapes) != len(detail):
            return empty_segments()
        rows = np.flatnonzero(gemm_shapes == key)
        overlay = Overlay(
            detail.rank[rows],
            detail.lane[rows],
            detail.start_ns[rows],
            detail.end_ns[rows],
            rows,
            np.full(len(rows), key, dtype=object),
        )
        return overlay_segments(data, overlay)
    if kind == "collective":
        rows = instance_rows(detail, data.step, key)
        if not len(rows):
            return empty_segments()
        overlay = Overlay(
            detail.rank[rows],
            detail.lane[rows],
            detail.start_ns[rows],
            detail.end_ns[rows],
            detail.instance[rows],
            np.full(len(rows), key, dtype=object),
        )
        return overlay_segments(data, overlay)
    if kind == "class" and key in CLASS_NAMES.values():
        return data.activities[key]
    if kind == "search":
        needle = key.lower()
        parts = [seg for seg in data.activities.values() if len(seg)]
        if data.launches is not None and len(data.launches):
            parts.append(data.launches)
        hits = [s.take(_holds(s.text, needle)) for s in parts]
        return concat_segments([*hits, _path_pieces(data, path, needle)])
    if kind == "kernel":  # a signature is "name|grid=..|block=..|dims=..": its kernel's name
        name = short_names((key.split("|", 1)[0],))[0]
        parts = [seg for seg in data.activities.values() if len(seg)]
        return concat_segments([s.take(s.text == name) for s in parts])
    return empty_segments()
