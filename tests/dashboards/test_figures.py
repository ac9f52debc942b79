"""The pure parts of the dashboard: timeline arrays, figure builders, adapters (no browser).

Traces are built here with tests/kineto.py, so every expected interval is known by hand.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from dash._utils import to_json

from tests.kineto import Collective, RankTrace, late_all_gather_ranks, write_run
from tpscope.dashboards import focus, overlays, results
from tpscope.dashboards.figures import breakdown, collectives, contention, timeline
from tpscope.dashboards.overlays import Overlay
from tpscope.dashboards.timeline_data import (
    AGG_BINS,
    link_arrays,
    overlay_segments,
    path_arrays,
    timeline_data,
)
from tpscope.metrics import analyze_run, as_json
from tpscope.metrics.per_activity import activity_detail
from tpscope.trace import load_run

AG = Collective("_allgather_base", in_nelems=1024, out_nelems=2048)
_DATA = Path(__file__).resolve().parents[1] / "data"
UNFUSED_RUN, CHUNKED_RUN = _DATA / "h200-nvlink-unfused", _DATA / "h200-shm-chunked4"
CPU_RUN = _DATA / "cpu-gloo-tiny"


def _rank(rank: int, shift: float = 0.0) -> RankTrace:
    r = RankTrace(rank)
    r.gpu_annotation("ProfilerStep#1", 0 + shift, 400)
    r.gpu_annotation("tpscope/layer0/ag_gemm", 10 + shift, 200)
    r.gpu_annotation("tpscope/layer0/ag_gemm/chunk0", 10 + shift, 90)
    r.gpu_annotation("nccl:_all_gather_base", 10 + shift, 50, stream=14)
    r.kernel("gemm", 10 + shift, 100)  # compute, stream 7
    r.kernel("gemm", 120 + shift, 100)
    r.kernel("ncclDevKernel_AllGather", 50 + shift, 100, stream=14, collective=AG)
    r.memcpy("Memcpy HtoD (Pageable -> Device)", 300 + shift, 20)
    r.gpu_annotation("ProfilerStep#2", 500 + shift, 300)
    r.kernel("gemm", 500 + shift, 50)
    return r


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    folder = write_run(tmp_path_factory.mktemp("runs") / "small", [_rank(0), _rank(1, shift=5.0)])
    return load_run(folder)


def test_timeline_data_lanes_classes_and_labels(small_run):
    d = timeline_data(small_run, 1, [0, 1])
    assert [lane.label for lane in d.lanes] == [
        "rank 0 · labels",
        "rank 0 · chunks",
        "rank 0 · stream 7 · compute",
        "rank 0 · stream 14 · NCCL · group 0",
        "rank 1 · labels",
        "rank 1 · chunks",
        "rank 1 · stream 7 · compute",
        "rank 1 · stream 14 · NCCL · group 0",
    ]
    assert len(d.activities["compute"]) == 4 and len(d.activities["comm"]) == 2
    assert len(d.activities["memory"]) == 2
    comm = d.activities["comm"]
    # rank 0's all-gather starts 50 µs after the step's earliest start; rank 1's is 5 µs later
    np.testing.assert_allclose(np.sort(comm.start_us), [50.0, 55.0])
    np.testing.assert_allclose(np.sort(comm.end_us), [150.0, 155.0])
    assert set(comm.y) == {3, 7}
    # the runtime's names, without the tpscope/ prefix; chunks on their own row; nccl: ranges left out
    assert sorted(set(d.labels.text)) == ["layer0/ag_gemm", "layer0/ag_gemm/chunk0"]
    chunk_rows = set(d.labels.y[d.labels.text == "layer0/ag_gemm/chunk0"])
    assert chunk_rows == {1, 5}
    assert d.step_us == (0.0, 405.0) and not d.capped


def test_labels_without_a_gpu_annotation_take_the_span_of_what_they_launched(tmp_path):
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 1000)
    r.cpu_annotation("tpscope/layer3/gemm_rs", 0, 30)  # launches the first two kernels only
    r.kernel("gemm", 100, 50, launch_us=(5, 2))
    r.kernel("ncclDevKernel_ReduceScatter", 160, 80, stream=14, launch_us=(20, 2))
    r.kernel("gemm", 400, 50, launch_us=(40, 2))
    d = timeline_data(load_run(write_run(tmp_path / "cpu-labels", [r])), 1, [0])
    assert d.labels.text.tolist() == ["layer3/gemm_rs"]
    assert (d.labels.start_us[0], d.labels.end_us[0]) == (100.0, 240.0)
    assert d.lanes[0].label == "rank 0 · labels"


def test_timeline_data_window_and_offsets(small_run):
    d = timeline_data(small_run, 1, [0, 1], window_us=(100.0, 200.0))
    assert d.view_us == (100.0, 200.0)
    assert all(((s.start_us < 200) & (s.end_us > 100)).all() for s in d.activities.values())
    aligned = timeline_data(small_run, 1, [0, 1], offsets_us={1: 5.0})
    np.testing.assert_allclose(np.sort(aligned.activities["comm"].start_us), [50.0, 50.0])
    only0 = timeline_data(small_run, 2, [0])
    assert [lane.label for lane in only0.lanes] == ["rank 0 · stream 7 · compute"]
    assert timeline_data(small_run, 99, [0, 1]) is None


def _busy_cover(seg, start_us, end_us, tol_us):
    """Whether every interval [start, end] lies inside one drawn segment (within tol)."""
    order = np.argsort(seg.start_us)
    s, e = seg.start_us[order], seg.end_us[order]
    i = np.searchsorted(s, start_us + tol_us, "right") - 1
    return bool((i >= 0).all() and (e[np.maximum(i, 0)] >= end_us - tol_us).all())


def test_a_100k_activity_step_merges_what_is_narrower_than_a_pixel_and_leaves_nothing_out(tmp_path):
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 4_000_000)
    n = 100_000
    durations = np.arange(n) % 97 + 1.0
    starts = np.arange(n) * 30.0
    starts[n // 2 :] += 200_000.0  # an idle gap of 200 ms: 80 pixels that must stay empty
    # building the input trace
    for i, (s0, dur) in enumerate(zip(starts.tolist(), durations.tolist())):
        r.kernel(
            "ncclDevKernel_AllGather" if i % 3 == 0 else "gemm",
            s0,
            dur,
            stream=14 if i % 3 == 0 else 7,
        )
    r.kernel("gemm", 3_500_000.0, 400_000.0)  # one kernel a tenth of the step wide: drawn as itself
    run = load_run(write_run(tmp_path / "big", [r]))
    t0 = time.perf_counter()
    d = timeline_data(run, 1, [0])
    fig = timeline.timeline_figure(d)
    payload = to_json(fig)
    elapsed = time.perf_counter() - t0
    assert d.total == n + 1 and d.aggregated == n and d.capped
    assert d.drawn < 4 * AGG_BINS
    comp, comm = d.activities["compute"], d.activities["comm"]
    wide = comp.end_us - comp.start_us == 400_000.0
    assert wide.sum() == 1 and comp.start_us[wide][0] == 3_500_000.0
    pixel = 4_000_000.0 / AGG_BINS
    is_comm = np.arange(n) % 3 == 0
    assert _busy_cover(comm, starts[is_comm], starts[is_comm] + durations[is_comm], 1e-6)
    assert _busy_cover(
        comp.take(~wide), starts[~is_comm], starts[~is_comm] + durations[~is_comm], 1e-6
    )
    # the gap stays empty (no invented busy time), and hover counts every merged activity once
    gap = (starts[n // 2 - 1] + durations[n // 2 - 1] + pixel, starts[n // 2] - pixel)
    for seg in (comm, comp):
        assert not ((seg.start_us < gap[1]) & (seg.end_us > gap[0])).any()
    counted = sum(
        int(t.split()[0].replace(",", ""))
        for seg in (comm, comp)
        for t in seg.text
        if t.endswith(" activities")
    )
    assert counted == n
    assert "narrower than a pixel are merged" in timeline.timeline_note(d)
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) - {timeline.EXPOSED} == {"compute", "comm"}
    assert all(t.type == "scattergl" for t in fig.data) is (d.drawn >= 5000)
    assert len(payload) < 2_000_000, len(payload)
    assert elapsed < 5.0, elapsed
    window = timeline_data(run, 1, [0], window_us=(0.0, 30_000.0))  # a zoom shows each it holds
    assert window.total == window.drawn == 1000 and not window.capped


def test_timeline_overlays_and_links(small_run):
    d = timeline_data(small_run, 1, [0, 1])
    comm_lane = {r.rank: int(r.gpu.lane[r.gpu.cls == 1][0]) for r in small_run.ranks}
    start = {r.rank: int(r.gpu.start_ns[r.gpu.cls == 1][0]) for r in small_run.ranks}
    members = Overlay(
        rank=np.array([0, 1]),
        lane=np.array([comm_lane[0], comm_lane[1]]),
        start_ns=np.array([start[0], start[1]]),
        end_ns=np.array([start[0], start[1]]) + 100_000,
        group=np.array([0, 0]),
        text=np.array(["collective"] * 2, dtype=object),
    )
    waits = overlay_segments(d, members.take(np.array([0])))
    assert (
        len(waits) == 1
        and waits.start_us[0] == pytest.approx(50.0)
        and waits.end_us[0] == pytest.approx(150.0)
    )
    x, y = link_arrays(d, members)
    np.testing.assert_allclose(x, [50.0, 55.0])
    np.testing.assert_allclose(y, [3, 7])
    two = Overlay(
        *(
            np.concatenate([getattr(members, f)] * 2)
            for f in Overlay.__slots__
            if getattr(members, f) is not None
        )
    )
    two = Overlay(two.rank, two.lane, two.start_ns, two.end_ns, np.array([0, 0, 1, 1]), two.text)
    x2, _ = link_arrays(d, two)
    assert np.isnan(x2).sum() == 1 and len(x2) == 5  # two polylines, one gap between them
    path = path_arrays(d, members)
    np.testing.assert_allclose(path[0], [50.0, 150.0, 55.0, 155.0])
    hidden = Overlay(
        *(
            np.concatenate([getattr(members, f), getattr(members, f)[:1]])
            for f in Overlay.__slots__
            if getattr(members, f) is not None
        )
    )
    hidden = Overlay(
        np.array([0, 9, 0]), hidden.lane, hidden.start_ns, hidden.end_ns, hidden.group, hidden.text
    )
    # the middle segment is on a rank not drawn: the line breaks there
    x3 = path_arrays(d, hidden)[0]
    assert len(x3) == 5 and np.isnan(x3[2])
    fig = timeline.timeline_figure(d, waits=waits, links=(x, y), path=path)
    assert {t.name for t in fig.data} >= {"comm wait", "collective links", "critical path"}
    elsewhere = Overlay(
        np.array([9]),
        np.array([0]),
        np.array([1]),
        np.array([2]),
        np.array([0]),
        np.array(["x"], dtype=object),
    )
    assert len(overlay_segments(d, elsewhere)) == 0


def test_overlays_come_from_the_analyzers_matching_and_path(tmp_path):
    """Two ranks, one all-gather that rank 1 reaches 40 µs late: rank 0 waits 40 µs (metrics.md §5)."""
    run = load_run(write_run(tmp_path / "late", late_all_gather_ranks(40.0)))
    x = activity_detail(run)
    members = overlays.collective_members(x, 1)
    assert members.rank.tolist() == [0, 1] and len(set(members.group.tolist())) == 1
    np.testing.assert_allclose(overlays.arrival_us(members), [0.0, 40.0])
    waits = overlays.wait_parts(x, 1)
    assert waits.rank.tolist() == [0]
    assert (waits.end_ns - waits.start_ns).tolist() == [40_000]
    doc = as_json(analyze_run(run))
    assert [c["wait_us"] for c in doc["collectives"]] == [40.0]
    path = overlays.critical_path(x, 1)
    assert len(path) > 0 and set(path.text) <= set(overlays.KIND_NAMES)
    # the path's segments add up to the analyzer's critical-path length of the step
    assert (path.end_ns - path.start_ns).sum() / 1000 == pytest.approx(
        doc["critical_path"][0]["length_us"]
    )


def test_breakdown_figure_is_the_json(small_run):
    doc = as_json(analyze_run(small_run))
    rows = results.step_rows(doc)
    fig = breakdown.breakdown_figure(rows)
    by_name = {t.name: t for t in fig.data}
    np.testing.assert_allclose(by_name["exposed comm"].y, [r["exposed_comm_us"] for r in rows])
    np.testing.assert_allclose(by_name["hidden comm"].y, [r["hidden_comm_us"] for r in rows])
    np.testing.assert_allclose(by_name["idle"].y, [r["idle_us"] for r in rows])
    np.testing.assert_allclose(
        by_name["compute (alone)"].y, [r["compute_us"] - r["hidden_comm_us"] for r in rows]
    )
    # the stack adds up to the step where memory does not overlap compute or comm (here: it does not)
    total = sum(
        np.asarray(by_name[n].y)
        for n in ("compute (alone)", "hidden comm", "exposed comm", "memory", "idle")
    )
    np.testing.assert_allclose(total, [r["step_time_us"] for r in rows])
    assert results.step_rows(doc, [1]) == [r for r in rows if r["rank"] == 1]


def test_views_say_not_available_instead_of_zeros():
    for fig in (
        breakdown.critical_path_figure([]),
        collectives.skew_figure([]),
        collectives.arrival_figure([], []),
        contention.contention_figure([]),
        contention.tax_figure([{"rank": 0, "step": 1, "contention_tax_us": None}]),
    ):
        assert "not available" in fig.layout.meta["not_available"]
        assert len(fig.data) == 0


def test_critical_path_and_collective_figures_from_rows():
    cp = [
        {
            "step": 1,
            "length_us": 10.0,
            "compute_us": 4.0,
            "comm_us": 3.0,
            "memory_us": 0.0,
            "host_us": 2.0,
            "idle_us": 1.0,
        }
    ]
    fig = breakdown.critical_path_figure(cp)
    assert {t.name: t.y[0] for t in fig.data if t.type == "bar"} == {
        "compute": 4.0,
        "comm": 3.0,
        "memory": 0.0,
        "host": 2.0,
        "idle": 1.0,
    }
    rows = [
        {"step": 1, "key": "0, 1", "collective": "allgather", "skew_us": 2.5, "bytes": 4096},
        {"step": 1, "key": "0, 2", "collective": "reduce_scatter", "skew_us": 0.5, "bytes": 4096},
    ]
    fig = collectives.skew_figure(rows)
    assert sorted(float(y) for t in fig.data for y in t.y) == [0.5, 2.5]
    cols = {c["field"]: c for c in collectives.table_columns(rows)}
    assert {"step", "collective", "skew_us", "bytes"} <= set(cols)
    # numbers right-aligned, formatted by d3 and filtered as numbers (the browser tests type >, <=, ...);
    # an empty cell, not 0, for no value; bytes in binary units; keys sorted with their numbers as numbers
    assert cols["skew_us"]["type"] == "numericColumn"
    assert cols["skew_us"]["filterParams"]["textMatcher"]["function"] == "numberTextMatcher(params)"
    assert cols["skew_us"]["valueFormatter"]["function"].startswith(
        "params.value == null ? '' : d3.format(',.3f')"
    )
    assert cols["bytes"]["valueFormatter"]["function"] == "formatBytes(params.value)"
    assert cols["key"]["comparator"] == {"function": "naturalCompare"}
    assert (
        collectives.header("queue_depth_us") == "queue depth (µs)"
        and collectives.header("peak_bytes") == "peak"
    )
    assert "type" not in cols["collective"] and cols["collective"]["filter"] == "agTextColumnFilter"


def test_contention_rows_and_figures_from_the_analysis():
    kernels = [
        SimpleNamespace(
            signature="gemm|1,1,1",
            n_isolated=12,
            n_overlapped=20,
            isolated_median_us=10.0,
            overlapped_median_us=12.0,
            slowdown=0.2,
            baseline="own",
        ),
        SimpleNamespace(
            signature="gelu",
            n_isolated=0,
            n_overlapped=4,
            isolated_median_us=None,
            overlapped_median_us=3.0,
            slowdown=None,
            baseline=None,
        ),
    ]
    kernels.append(  # under the floor of significance: 3 samples alone
        SimpleNamespace(
            signature="sort",
            n_isolated=3,
            n_overlapped=30,
            isolated_median_us=5.0,
            overlapped_median_us=115.0,
            slowdown=22.0,
            baseline="own",
        )
    )
    analysis = SimpleNamespace(
        kernel_contention=[dataclass_like(k) for k in kernels],
        comm_contention=[],
        steps=[1, 2, 3, 4],  # rank-steps
    )
    rows = results.contention_rows(analysis)
    assert [r["signature"] for r in rows] == ["gemm|1,1,1"]  # no baseline: not drawn as a zero
    assert rows[0]["tax_us_per_step"] == pytest.approx(20 * 2.0 / 4)
    fig = contention.contention_figure(rows)
    assert [t.x[0] for t in fig.data] == [10.0, 12.0]
    assert "not available" in contention.comm_contention_figure([]).layout.meta["not_available"]


def dataclass_like(ns: SimpleNamespace):
    from dataclasses import make_dataclass

    cls = make_dataclass("K", list(vars(ns)))
    return cls(**vars(ns))


def _gemm_ranks(n: int) -> list:
    """Per rank: `n` isolated 100 µs GEMMs and `n` of 150 µs beside an all-gather."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        for i in range(n):
            r.kernel("nvjet", 200.0 * i, 100, input_dims=[[1024, 4096], [4096, 4096]])
        r.kernel("ncclDevKernel_AllGather", 2000, 200 * n, stream=14, collective=AG)
        for i in range(n):
            r.kernel("nvjet", 2001 + 200.0 * i, 150, input_dims=[[1024, 4096], [4096, 4096]])
        ranks.append(r)
    return ranks


def test_gemm_contention_rows_figure_and_budget_text(tmp_path):
    """Five isolated 100 µs GEMMs and five of 150 µs beside an all-gather, per rank: 10 of each,
    at the floor."""
    ranks = _gemm_ranks(5)
    analysis = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    rows = results.gemm_contention_rows(analysis)
    assert [(r["m"], r["k"], r["n"]) for r in rows] == [(1024, 4096, 4096)]
    fig = contention.gemm_contention_figure(rows)
    assert [t.name for t in fig.data] == [
        "isolated (median)",
        "isolated, same SMs",
        "overlapped (median)",
    ]
    assert [t.x[0] for t in fig.data] == [100.0, 100.0, 150.0]
    # the bar names its tax per rank and step (10 x 50 µs over 2 rank-steps), the title the floor
    label = fig.data[0].y[0]
    assert label.startswith("#1 1024×4096×4096 ") and label.endswith(" · 250 µs/step"), label
    assert "at least 10 GEMMs alone" in fig.layout.title.text
    text = results.gemm_budget_text(analysis)  # per rank and step: 5 x 100 + 5 x 150 µs
    assert (
        "GEMM time per rank and step: 1,250 µs = 1,000 alone + 250 tax (0 fewer SMs, 250 interference"
        in text
    )
    for r in ranks:  # the same GEMMs with nothing beside them: no budget to show
        r.events = [e for e in r.events if not e["name"].startswith("ncclDevKernel")]
    alone = analyze_run(load_run(write_run(tmp_path / "alone", ranks)))
    assert results.gemm_budget_text(alone) == "" and results.gemm_contention_rows(alone) == []


def test_a_gemm_shape_under_the_floor_is_not_drawn(tmp_path):
    """Three of each per rank: 6 alone and 6 beside a transfer, under the floor of 10; the budget
    still counts them."""
    analysis = analyze_run(load_run(write_run(tmp_path / "run", _gemm_ranks(3))))
    assert results.gemm_contention_rows(analysis) == []
    assert "GEMM time per rank and step: 750 µs = 600 alone + 150 tax" in results.gemm_budget_text(
        analysis
    )


def test_a_collective_is_named_by_its_size_in_binary_units():
    fig = contention.comm_contention_figure(
        [
            {
                "collective": "_reduce_scatter_base",
                "bytes": 32 * 1024 * 1024,
                "isolated_transfer_us": 672.3,
                "overlapped_transfer_us": 681.3,
            }
        ]
    )
    assert fig.data[0].y[0] == "_reduce_scatter_base · 32 MiB"  # as analyze's tables write it


def test_a_kernel_of_a_few_microseconds_does_not_fill_the_contention_axis():
    from tpscope.dashboards.figures.contention import comm_contention_figure, contention_figure

    row = {
        "signature": "tiny_kernel",
        "isolated_median_us": 1.2,
        "overlapped_median_us": 1.5,
        "slowdown": 0.25,
        "n_isolated": 3,
        "n_overlapped": 3,
        "baseline": "own",
        "tax_us_per_step": 0.3,
    }
    lo, hi = contention_figure([row]).layout.xaxis.range
    assert lo == 0 and 1.5 / hi <= 0.15  # the bar is the short bar it is
    big = {**row, "isolated_median_us": 400.0, "overlapped_median_us": 500.0}
    assert contention_figure([big]).layout.xaxis.range[1] >= 500.0  # and a long one still fits
    comm = {
        "collective": "all_gather",
        "bytes": 1024,
        "isolated_transfer_us": 2.0,
        "overlapped_transfer_us": 2.5,
        "isolated_busbw_gbps": 1.0,
        "overlapped_busbw_gbps": 0.8,
        "slowdown": 0.25,
    }
    assert 2.5 / comm_contention_figure([comm]).layout.xaxis.range[1] <= 0.25


def test_a_gemm_bar_selects_every_gemm_of_its_shape_and_a_signature_bar_its_kernels(tmp_path):
    """Step 1 of two ranks: 3 GEMMs 1024×4096×4096, 2 of 1024×4096×8192 and a `gelu`, all of one
    kernel name `nvjet` but the gelu; step 2 holds one more of the first shape (not in the view)."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.gpu_annotation("ProfilerStep#1", 0, 1000)
        for i in range(3):
            r.kernel(
                "nvjet",
                100.0 * i,
                50,
                input_dims=[[1024, 4096], [4096, 4096]],
                input_type=["float", "float"],
            )
        for i in range(2):
            r.kernel(
                "nvjet",
                400 + 100.0 * i,
                50,
                input_dims=[[1024, 4096], [4096, 8192]],
                input_type=["float", "float"],
            )
        r.kernel("gelu", 700, 20)
        r.gpu_annotation("ProfilerStep#2", 1000, 500)
        r.kernel(
            "nvjet",
            1100,
            50,
            input_dims=[[1024, 4096], [4096, 4096]],
            input_type=["float", "float"],
        )
        ranks.append(r)
    run = load_run(write_run(tmp_path / "run", ranks))
    fig = contention.gemm_contention_figure(
        [
            {
                "shape": "1024×4096×4096 float",
                "rule": "same shape",
                "source": "run",
                "slowdown": 0.5,
                "n_overlapped": 3,
                "tax_us_per_step": 10.0,
                "baseline_us": 50.0,
                "same_sm_us": None,
                "overlapped_median_us": 75.0,
            }
        ]
    )
    # as a click carries it
    sels = [contention.clicked_selection(list(t.customdata[0])) for t in fig.data]
    assert sels == [{"kind": "gemm", "key": "1024×4096×4096 float"}] * 3  # every bar of the shape
    data = timeline_data(run, 1, [0, 1])
    detail = activity_detail(run)
    shapes = overlays.gemm_shape_labels(run)
    got = focus.selected_segments(data, detail, sels[0], shapes)
    assert len(got) == 6 and sorted(set(got.start_us.tolist())) == [0.0, 100.0, 200.0]
    other = focus.selected_segments(
        data, detail, {"kind": "gemm", "key": "1024×4096×8192 float"}, shapes
    )
    assert sorted(other.start_us.tolist()) == [400.0, 400.0, 500.0, 500.0]
    # shapes unknown: nothing outlined
    assert len(focus.selected_segments(data, detail, sels[0], None)) == 0
    only_rank_1 = timeline_data(run, 1, [1])
    assert len(focus.selected_segments(only_rank_1, detail, sels[0], shapes)) == 3
    # the per-signature figure: its bars still select the kernels of their signature's name
    rows = [
        {
            "signature": "nvjet|grid=[1, 1, 1]|block=[128, 1, 1]",
            "isolated_median_us": 50.0,
            "overlapped_median_us": 60.0,
            "slowdown": 0.2,
            "n_isolated": 3,
            "n_overlapped": 3,
            "baseline": "own",
        }
    ]
    kfig = contention.contention_figure(rows)
    ksels = [
        contention.clicked_selection(c if isinstance(c, str) else list(c))
        for c in (t.customdata[0] for t in kfig.data)
    ]
    assert ksels == [{"kind": "kernel", "key": rows[0]["signature"]}] * 2
    # every nvjet of step 1, both shapes
    assert len(focus.selected_segments(data, detail, ksels[0])) == 10


def _threads_rank(step_us: float = 300) -> RankTrace:
    """Thread 100: `aten::linear` [5, 30] around the launch of gemm_a (10 µs, 5 µs), then gemm_b's
    launch (70, 5) inside `aten::mm` [69.5, 75.5]; thread 200 launches gemm_c (40, 5) on stream 8;
    thread 300 launches nothing. gemm_b waits for its launch: the path's host segment on thread 100."""
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, step_us)
    r.events.append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::linear",
            "pid": 100,
            "tid": 100,
            "ts": 5,
            "dur": 25,
            "args": {},
        }
    )
    r.kernel("gemm_a", 16, 50, launch_us=(10, 5))
    r.kernel("gemm_b", 76, 50, launch_us=(70, 5))
    n = len(r.events)
    r.kernel("gemm_c", 130, 50, stream=8, launch_us=(40, 5))
    for e in r.events[n:]:
        if e["pid"] == 100:
            e["tid"] = 200
    r.events.append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::idle",
            "pid": 100,
            "tid": 300,
            "ts": 50,
            "dur": 10,
            "args": {},
        }
    )
    return r


def test_cpu_threads_show_their_outermost_ops_launch_arrows_and_the_paths_cpu_segments(tmp_path):
    run = load_run(write_run(tmp_path / "threads", [_threads_rank()]))
    d = timeline_data(run, 1, [0], launches=True)
    assert [lane.label for lane in d.lanes] == [
        "rank 0 · CPU thread 100",
        "rank 0 · CPU thread 200",
        "rank 0 · stream 7 · compute",
        "rank 0 · stream 8 · compute",
    ]
    assert d.thread_of == {(0, 100): 0, (0, 200): 1}
    ops = d.launches  # the nested aten::mm and cudaLaunchKernel of gemm_a stay inside aten::linear
    assert ops.text.tolist() == ["aten::linear", "aten::mm", "aten::mm"]
    np.testing.assert_allclose(ops.start_us, [5.0, 69.5, 39.5])
    np.testing.assert_allclose(ops.end_us, [30.0, 75.5, 45.5])
    assert ops.y.tolist() == [0, 0, 1] and d.cpu_total == 3 and d.cpu_aggregated == 0
    x, y = d.arrows  # from each launch call's end on its thread row to its kernel's start
    np.testing.assert_allclose(x.reshape(-1, 3)[:, :2], [[15, 16], [75, 76], [45, 130]])
    np.testing.assert_allclose(y.reshape(-1, 3)[:, :2], [[0, 2], [0, 2], [1, 3]])
    path = overlays.critical_path(activity_detail(run), 1)
    # the step's window (its GPU-side ProfilerStep, metrics.md §3) begins at 0: thread 100's time
    # from there to gemm_b's launch (0-75, cut where aten::linear and the launches begin and end),
    # the launch's 1 µs, gemm_b, the 4 µs gemm_c was held, gemm_c
    assert path.text.tolist() == ["host"] * 6 + ["compute", "idle", "compute"]
    assert (path.start_ns[0], path.end_ns[4], path.end_ns[5]) == (
        run.ranks[0].steps.start_ns[0],
        run.ranks[0].steps.start_ns[0] + 75_000,
        run.ranks[0].steps.start_ns[0] + 76_000,
    )
    assert path.tid.tolist()[:2] == [100, 100] and path.lane[0] == -3
    px, py, custom, text = path_arrays(d, path)
    # thread 100 holds gemm_b back until its launch, from the window's start: before aten::linear,
    # in it (cut where gemm_a's launch begins and ends), then up to aten::mm's call
    np.testing.assert_allclose(px[:10], [0.0, 5.0, 5.0, 9.5, 9.5, 15.5, 15.5, 30.0, 30.0, 75.0])
    np.testing.assert_allclose(py[:12], [0] * 10 + [2, 2])
    np.testing.assert_allclose(custom[0], [0.0, 5.0])
    assert text[0] == "host"
    fig = timeline.timeline_figure(d, path=(px, py, custom, text))
    cpu = next(t for t in fig.data if t.name == "CPU ops")
    assert cpu.text[0] == "aten::linear<br>CPU op · thread 100" and tuple(cpu.customdata[0]) == (
        5.0,
        25.0,
    )
    assert {"launch arrows", "critical path"} <= {t.name for t in fig.data}
    assert "3 outermost CPU ops" in timeline.timeline_note(d)
    plain = timeline_data(run, 1, [0])  # off: no thread rows, and the path keeps its GPU part
    assert not plain.thread_of and np.isnan(path_arrays(plain, path)[0]).sum() == 0
    assert path_arrays(plain, path)[0][0] == pytest.approx(75.0)
    window = timeline_data(run, 1, [0], window_us=(0.0, 35.0), launches=True)  # only gemm_a in view
    assert list(window.thread_of) == [(0, 100)] and window.launches.text.tolist() == [
        "aten::linear"
    ]


def test_a_search_outlines_the_paths_host_time_named_so_on_its_thread_row(tmp_path):
    """Host time in a nested op, which no drawn CPU op shows: `aten::linear` holds [5, 30] on
    thread 100 but for gemm_a's launch inside it ([9.5, 15.5], its own `aten::mm`); the path's
    host time on that thread is [0, 75] then the launch (_threads_rank)."""
    run = load_run(write_run(tmp_path / "threads", [_threads_rank()]))
    d = timeline_data(run, 1, [0], launches=True)
    path = overlays.critical_path(activity_detail(run), 1)

    def outlined(key, shown=d):
        s = focus.selected_segments(shown, None, {"kind": "search", "key": key}, None, path)
        return sorted(zip(s.start_us.tolist(), s.end_us.tolist(), s.y.tolist(), s.text.tolist()))

    # the outermost op on thread 100's row, and the path's two pieces of it
    assert outlined("aten::linear") == [
        (5.0, 9.5, 0, "aten::linear"),
        (5.0, 30.0, 0, "aten::linear"),
        (15.5, 30.0, 0, "aten::linear"),
    ]
    # both outermost aten::mm (threads 100 and 200), and the path's time in gemm_a's nested one,
    # before aten::linear and up to gemm_b's launch (named by the op it led to), any case typed
    assert outlined("ATEN::MM") == [
        (0.0, 5.0, 0, "aten::mm"),
        (9.5, 15.5, 0, "aten::mm"),
        (30.0, 75.0, 0, "aten::mm"),
        (39.5, 45.5, 1, "aten::mm"),
        (69.5, 75.5, 0, "aten::mm"),
    ]
    assert outlined("gemm_b") == [(76.0, 126.0, 2, "gemm_b")]  # a kernel, as before
    # without the CPU threads' rows nothing of the host side is drawn, so nothing of it outlined
    assert outlined("aten::linear", timeline_data(run, 1, [0])) == []


def test_a_million_cpu_ops_are_merged_per_pixel_on_their_thread_row(tmp_path):
    from dataclasses import replace

    from tpscope.trace.tables import CpuCalls

    run = load_run(write_run(tmp_path / "threads", [_threads_rank(step_us=200_000)]))
    r = run.ranks[0]
    n = 1_000_000
    start = int(r.steps.start_ns[0]) + 100_000 + np.arange(n, dtype=np.int64) * 100
    many = CpuCalls(
        start_ns=start,
        end_ns=start + 50,
        name_id=np.zeros(n, np.int32),
        tid=np.full(n, 200, np.int64),
        external_id=np.full(n, -1, np.int64),
        correlation=np.full(n, -1, np.int64),
    )
    # 100 ms of 50 ns ops on thread 200, from 100 µs
    big = replace(run, ranks=(replace(r, cpu_ops=many),))
    begin = time.perf_counter()
    d = timeline_data(big, 1, [0], launches=True)
    elapsed = time.perf_counter() - begin
    # with the three launch calls (cudaLaunchKernel, 5 µs), every op is narrower than a pixel
    assert d.cpu_total == d.cpu_aggregated == n + 3 and d.arrows is None
    assert sum(int(t.split()[0].replace(",", "")) for t in d.launches.text.tolist()) == n + 3
    assert len(d.launches) < 10 and elapsed < 5.0, (len(d.launches), elapsed)
    fig = timeline.timeline_figure(d)
    assert next(t for t in fig.data if t.name == "CPU ops").type == "scatter"  # a few merged spans
    # gemm_c: thread 200's
    zoom = timeline_data(big, 1, [0], launches=True, window_us=(130.0, 130.5))
    # each op
    assert list(zoom.thread_of) == [(0, 200)] and zoom.cpu_total == 5 and zoom.cpu_aggregated == 0
    np.testing.assert_allclose(zoom.launches.start_us, [130.0, 130.1, 130.2, 130.3, 130.4])


def test_exposed_intervals_of_a_hand_made_lane():
    from tpscope.dashboards.timeline_data import exposed_intervals
    from tpscope.trace import ActivityClass

    # compute [0, 10) and [20, 25) on lane 0; comm [5, 30) on lane 1: exposed [10, 20) and [25, 30)
    start = np.array([0, 20, 5], np.int64)
    end = np.array([10, 25, 30], np.int64)
    cls = np.array([ActivityClass.COMPUTE, ActivityClass.COMPUTE, ActivityClass.COMM], np.int8)
    lane = np.array([0, 0, 1])
    ((k, s, e),) = exposed_intervals(start, end, cls, lane, np.ones(3, bool))
    assert k == 1 and s.tolist() == [10, 25] and e.tolist() == [20, 30]


@pytest.mark.parametrize("run", [UNFUSED_RUN, CHUNKED_RUN, CPU_RUN], ids=lambda p: p.name)
def test_the_timeline_marks_exposed_communication_as_the_analyzer_counts_it(run):
    """On one rank, the Timeline's exposed parts add up to the JSON's exposed_comm_us (§4)."""
    loaded = load_run(run)
    doc = as_json(analyze_run(loaded))
    for s in doc["steps"]:
        data = timeline_data(loaded, s["step"], [s["rank"]], offsets_us=doc["clock_offsets_us"])
        ex = data.exposed
        got = 0.0 if ex is None else float((ex.end_us - ex.start_us).sum())
        assert got == pytest.approx(s["exposed_comm_us"], abs=0.01), (s["rank"], s["step"])
        fig = timeline.timeline_figure(data)
        assert (timeline.EXPOSED in {t.name for t in fig.data}) == (s["exposed_comm_us"] > 0)


def _one_rank_steps(times_us: list[float]) -> dict:
    """An analyzer document of one rank's steps 1, 2, ... taking `times_us`, the first a warm-up."""
    return {
        "steps": [
            {
                "rank": 0,
                "step": k + 1,
                "step_time_us": t,
                "exposed_comm_us": 0.0,
                "first_step": k == 0,
            }
            for k, t in enumerate(times_us)
        ]
    }


def test_the_page_opens_on_the_slowest_step_after_the_warm_up():
    doc = _one_rank_steps([900.0, 300.0, 310.0])
    summaries = results.step_summaries(doc)
    assert [s["step"] for s in summaries if s["slowest"]] == [3]
    assert "warm-up" in results.step_label(summaries[0])
    doc["first_step_included"] = True  # asked for: the first step counts like the others
    assert [s["step"] for s in results.step_summaries(doc) if s["slowest"]] == [1]


def _label_texts(fig) -> list[tuple[float, float, str]]:
    t = next(t for t in fig.data if t.name == "label names")
    return list(zip(np.asarray(t.x, float).tolist(), np.asarray(t.y, float).tolist(), t.text))


def test_chunk_label_texts_never_overlap_on_a_row():
    """Four chunk ranges on one row, #1 inside #0's span (a CPU run's chunks run on several
    threads), #2 far away, #3 on another row at #1's time: #0 (the widest) and #2 and #3 are
    written, #1 is not (its text would sit on #0's); a label narrower than its text never is."""
    from tpscope.dashboards.timeline_data import Segments

    names = ["l/ag_gemm/chunk0", "l/ag_gemm/chunk1", "l/ag_gemm/chunk2", "l/ag_gemm/chunk3", "x"]
    labels = Segments(
        np.array([0.0, 400.0, 5000.0, 400.0, 8000.0]),
        np.array([1000.0, 900.0, 5500.0, 900.0, 8000.5]),
        np.array([1, 1, 1, 2, 1]),
        np.array(names, dtype=object),
    )
    texts = timeline._label_text_trace(labels, (0.0, 10_000.0))
    got = sorted(zip(texts.text, np.asarray(texts.y) + 0.3))
    assert got == [("#0", 1.0), ("#2", 1.0), ("#3", 2.0)]


def test_a_cpu_runs_timeline_has_thread_lanes_and_apart_label_texts():
    """On the gloo run, every step on both ranks: lanes are CPU threads (no stream, no NCCL), and
    no two label texts on a row are closer than half their widths (PLOT_PX across the view)."""
    loaded = load_run(CPU_RUN)
    for step in sorted({s.step for s in analyze_run(loaded).steps}):
        data = timeline_data(loaded, step, [0, 1])
        lanes = [lane.label for lane in data.lanes]
        assert all("stream" not in t and "NCCL" not in t for t in lanes), lanes
        assert any("thread" in t and "collectives" in t for t in lanes), lanes
        fig = timeline.timeline_figure(data)
        assert [str(t) for t in fig.layout.yaxis.ticktext] == lanes
        texts = _label_texts(fig)
        px = timeline.PLOT_PX / (data.view_us[1] - data.view_us[0])
        for i, (x1, y1, t1) in enumerate(texts):
            for x2, y2, t2 in texts[i + 1 :]:
                if y1 == y2:
                    assert abs(x1 - x2) * px >= (len(t1) + len(t2)) / 2 * timeline.CHAR_PX, (t1, t2)


def test_the_step_strip_says_which_step_is_the_warm_up_left_out(tmp_path):
    """Three steps of one rank, the first a warm-up: its bar says so and is not drawn as the
    others, as `analyze` marks it `*`; a click still opens the step by its number."""
    from tpscope.dashboards.figures.steps import strip_figure

    doc = _one_rank_steps([900.0, 500.0, 600.0])
    fig = strip_figure(results.step_summaries(doc), chosen=3)
    bars = fig.data[0]
    assert list(bars.x) == ["step 1 (warm-up, left out)", "step 2", "step 3"]
    colors = list(bars.marker.color)
    assert colors[0] != colors[1] and colors[2] != colors[1]  # grey warm-up, red slowest (3)
    assert [c[0] for c in bars.customdata] == [1, 2, 3]
    assert "warm-up" in bars.customdata[0][2]
