"""The pure parts of the dashboard: timeline arrays, figure builders, adapters (no browser).

Traces are built here with tests/kineto.py, so every expected interval is known by hand.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
from tpscope.dashboards import results
from tpscope.dashboards.figures import breakdown, collectives, contention, timeline
from tpscope.dashboards.timeline_data import link_points, overlay_segments, timeline_data

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run, as_json
from tpscope.trace import load_run

AG = Collective("_allgather_base", in_nelems=1024, out_nelems=2048)


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
        "rank 0 · labels", "rank 0 · chunks", "rank 0 · stream 7", "rank 0 · stream 14",
        "rank 1 · labels", "rank 1 · chunks", "rank 1 · stream 7", "rank 1 · stream 14"]
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


def test_timeline_data_window_and_offsets(small_run):
    d = timeline_data(small_run, 1, [0, 1], window_us=(100.0, 200.0))
    assert d.view_us == (100.0, 200.0)
    assert all(((s.start_us < 200) & (s.end_us > 100)).all() for s in d.activities.values())
    aligned = timeline_data(small_run, 1, [0, 1], offsets_us={1: 5.0})
    np.testing.assert_allclose(np.sort(aligned.activities["comm"].start_us), [50.0, 50.0])
    only0 = timeline_data(small_run, 2, [0])
    assert [lane.label for lane in only0.lanes] == ["rank 0 · stream 7"]
    assert timeline_data(small_run, 99, [0, 1]) is None


def test_timeline_caps_large_steps_and_says_so(tmp_path):
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 1_000_000)
    n = 30_000
    durations = np.arange(n) % 97 + 1.0
    starts = np.arange(n) * 30.0
    for s, dur in zip(starts.tolist(), durations.tolist()):
        r.kernel("gemm", s, dur)
    run = load_run(write_run(tmp_path / "big", [r]))
    t0 = time.perf_counter()
    d = timeline_data(run, 1, [0], max_activities=5_000)
    fig = timeline.timeline_figure(d)
    elapsed = time.perf_counter() - t0
    assert d.total == n and d.drawn == 5_000 and d.capped
    kept = d.activities["compute"].end_us - d.activities["compute"].start_us
    assert kept.min() >= np.sort(durations)[-5_000] - 1e-9  # the longest are kept
    assert "showing the 5,000 longest of 30,000" in timeline.timeline_note(d)
    assert len(fig.data) == 1 and np.isnan(fig.data[0].x).sum() == 5_000  # one trace, NaN-separated
    assert elapsed < 2.0, elapsed


def test_timeline_overlays_and_links(small_run):
    d = timeline_data(small_run, 1, [0, 1])
    r0, r1 = small_run.ranks
    comm_lane = {r.rank: int(r.gpu.lane[r.gpu.cls == 1][0]) for r in small_run.ranks}
    start = {r.rank: int(r.gpu.start_ns[r.gpu.cls == 1][0]) for r in small_run.ranks}
    kernels = [{"rank": k, "lane": comm_lane[k], "start_ns": start[k], "end_ns": start[k] + 100_000,
                "wait_ns": 5_000 if k == 0 else 0} for k in (0, 1)]
    waits = overlay_segments(d, [{**k, "end_ns": k["start_ns"] + k["wait_ns"]} for k in kernels])
    assert len(waits) == 1 and waits.start_us[0] == pytest.approx(50.0) and waits.end_us[0] == pytest.approx(55.0)
    links = link_points(d, [kernels])
    assert len(links) == 1
    np.testing.assert_allclose(links[0][0], [50.0, 55.0])
    np.testing.assert_allclose(links[0][1], [3, 7])
    fig = timeline.timeline_figure(d, waits=waits, links=links, critical_path=waits)
    assert {t.name for t in fig.data} >= {"comm wait", "collective links", "critical path"}
    assert overlay_segments(d, [{"rank": 9, "lane": 0, "start_ns": 1, "end_ns": 2}]).start_us.size == 0


def test_breakdown_figure_is_the_json(small_run):
    doc = as_json(analyze_run(small_run))
    rows = results.step_rows(doc)
    fig = breakdown.breakdown_figure(rows)
    by_name = {t.name: t for t in fig.data}
    np.testing.assert_allclose(by_name["exposed comm"].y, [r["exposed_comm_us"] for r in rows])
    np.testing.assert_allclose(by_name["hidden comm"].y, [r["hidden_comm_us"] for r in rows])
    np.testing.assert_allclose(by_name["idle"].y, [r["idle_us"] for r in rows])
    np.testing.assert_allclose(by_name["compute (alone)"].y, [r["compute_us"] - r["hidden_comm_us"] for r in rows])
    # the stack adds up to the step where memory does not overlap compute or comm (here: it does not)
    total = sum(np.asarray(by_name[n].y) for n in ("compute (alone)", "hidden comm", "exposed comm", "memory", "idle"))
    np.testing.assert_allclose(total, [r["step_time_us"] for r in rows])
    assert results.step_rows(doc, [1]) == [r for r in rows if r["rank"] == 1]


def test_views_say_not_available_instead_of_zeros():
    for fig in (breakdown.critical_path_figure([]), collectives.skew_figure([]), collectives.arrival_figure([]),
                contention.contention_figure([]), contention.tax_figure([{"rank": 0, "step": 1,
                                                                          "contention_tax_us": None}])):
        assert "not available" in fig.layout.meta["not_available"]
        assert len(fig.data) == 0


def test_critical_path_and_collective_figures_from_rows():
    cp = [{"step": 1, "length_us": 10.0, "compute_us": 4.0, "comm_us": 3.0, "memory_us": 0.0, "host_us": 2.0,
           "idle_us": 1.0}]
    fig = breakdown.critical_path_figure(cp)
    assert {t.name: t.y[0] for t in fig.data if t.type == "bar"} == {
        "compute": 4.0, "comm": 3.0, "memory": 0.0, "host": 2.0, "idle": 1.0}
    rows = [{"step": 1, "key": "0, 1", "collective": "allgather", "skew_us": 2.5, "bytes": 4096},
            {"step": 1, "key": "0, 2", "collective": "reduce_scatter", "skew_us": 0.5, "bytes": 4096}]
    fig = collectives.skew_figure(rows)
    assert sorted(float(y) for t in fig.data for y in t.y) == [0.5, 2.5]
    cols = {c["id"] for c in collectives.table_columns(rows)}
    assert {"step", "collective", "skew_us", "bytes"} <= cols


def test_result_adapters_read_objects_when_present_and_nothing_otherwise():
    bare = SimpleNamespace(collectives=[], critical_path=[])
    assert results.collective_kernels(bare, 1) == [] and results.critical_path_segments(bare, 1) == []
    assert results.contention_rows(bare) == [] and results.arrival_rows(bare) == []
    inst = SimpleNamespace(step=1, key=("0", 3), collective="allgather", kernels=[
        {"rank": 0, "lane": 1, "start_ns": 1_000, "end_ns": 9_000, "wait_ns": 3_000},
        {"rank": 1, "lane": 1, "start_ns": 4_000, "end_ns": 9_000, "wait_ns": 0}])
    full = SimpleNamespace(collectives=[inst], critical_path=[SimpleNamespace(step=1, segments=[
        {"rank": 0, "lane": 0, "start_ns": 0, "end_ns": 5, "kind": "compute"}])],
        contention=[{"signature": "gemm|1,1,1", "isolated_median_us": 10.0, "overlapped_median_us": 12.0,
                     "slowdown": 0.2}])
    assert len(results.collective_kernels(full, 1)) == 1
    assert [r["arrival_us"] for r in results.arrival_rows(full, 1)] == [0.0, 3.0]
    assert results.critical_path_segments(full, 1)[0]["kind"] == "compute"
    rows = results.contention_rows(full)
    fig = contention.contention_figure(rows)
    assert [t.x[0] for t in fig.data] == [10.0, 12.0]
