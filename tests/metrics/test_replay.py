"""metrics.md §11: the replay on hand-built traces whose replayed times are known by hand, and the
identity on every sample run, corpus job and CPU job against the analyzer's own step times (§3)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.metrics.whatif import predict, prepare
from tpscope.metrics.whatif_changes import ChangeError, parse_change
from tpscope.trace import load_run

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
SAMPLES = sorted((REPO / "sample_traces").glob("h200x2-*"))
CORPUS = [
    *sorted(p for p in (DATA / "hta").iterdir() if any(p.glob("*.json*"))),
    DATA / "real" / "param-dlrm-torchrec-v100x8",
    DATA / "real" / "tracelens-b200-eager-rank0of8",
    DATA / "real" / "tracelens-qwen05b-h100",
    DATA / "real" / "tracelens-qwen05b-mi300",
    DATA / "h200-nvlink-unfused",
    DATA / "h200-shm-chunked4",
    *(DATA / "hta" / "critical_path" / n for n in ("alexnet", "simple_add", "cuda_event_sync")),
    DATA / "hta" / "critical_path" / "cuda_event_sync_multi_stream",
    *(DATA / "hta" / "trace_compare" / n for n in ("base", "test")),
    *(DATA / "hta" / "trace_diff" / n for n in ("control", "test")),
]
CPU_JOBS = sorted(p for p in (DATA / "foreign-cpu").iterdir() if p.is_dir())
CPU_RUNS = [*CPU_JOBS, DATA / "cpu-gloo-tiny"]
AG = Collective("_allgather_base", in_nelems=1024, out_nelems=2048, group_size=2)


def _two_ranks() -> list[RankTrace]:
    """Rank 0: `a` [0, 100], the all-gather [100, 300], `b` [300, 400]; rank 1: `a` [0, 150], the
    all-gather [150, 300], `b` [300, 400]; every kernel launched long before (the GPU binds).
    The all-gather's arrival is 150: each rank's transfer is 150 µs (§5)."""
    ranks = []
    for rank, a_us in ((0, 100), (1, 150)):
        r = RankTrace(rank)
        r.cpu_annotation("ProfilerStep#1", -60, 600)
        r.kernel("a", 0, a_us, launch_us=(-50, 1))
        r.kernel("ncclDevKernel_AllGather", a_us, 300 - a_us, launch_us=(-40, 1), collective=AG)
        r.kernel("b", 300, 100, launch_us=(-30, 1))
        ranks.append(r)
    return ranks


@pytest.mark.parametrize(
    "change, step_us",
    [
        ("comm=0.5", 150 + 75 + 100),  # transfer 150 -> 75 after the arrival at 150
        ("hide=all", 150 + 100),
        ("comm=2@all_gather", 150 + 300 + 100),
        # 4,096 bytes gathered, busbw factor 1/2: 10 µs + 2,048 B / 2.048 GB/s = 11 µs
        ("link=2.048,10", 150 + 11 + 100),
        # without LAT_US the run's fitted α: one message size, a fit through the origin (α = 0)
        ("link=2.048", 150 + 1 + 100),
    ],
)
def test_changes_on_a_hand_built_collective(tmp_path, change, step_us):
    inp = prepare(load_run(write_run(tmp_path / "run", _two_ranks())))
    w = predict(inp, [parse_change(change)])
    assert w.measured_steps_us == pytest.approx([400])
    assert w.replayed_steps_us == pytest.approx([400])
    assert w.changes[0].step_us == pytest.approx([step_us])


def test_a_shorter_transfer_moves_the_host_and_the_launch_after_a_sync(tmp_path):
    """Two ranks: the all-gather [0, 100] (both arrive at 0: all transfer), launched at (-5, 1);
    the CPU waits in cudaDeviceSynchronize [0, 102] (it returns 2 µs after the kernel), spends
    100 µs, launches `b` at (202, 3), which runs [206, 216]. With comm=0.5 the all-gather ends at
    50, the sync returns at 52, the launch call starts at 152 and ends at 155, `b` runs
    [156, 166]: the step is 166 µs. hide=all: 116 µs."""
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.cpu_annotation("ProfilerStep#1", -10, 300)
        r.kernel("ncclDevKernel_AllGather", 0, 100, launch_us=(-5, 1), collective=AG)
        r.raw(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaDeviceSynchronize",
                "pid": 100,
                "tid": 100,
                "ts": 0,
                "dur": 102,
                "args": {"correlation": 999_001},
            }
        )
        r.kernel("b", 206, 10, launch_us=(202, 3))
        ranks.append(r)
    inp = prepare(load_run(write_run(tmp_path / "run", ranks)))
    w = predict(inp, [parse_change("comm=0.5"), parse_change("hide=all")])
    assert w.replayed_steps_us == pytest.approx([216])
    assert [p.step_us[0] for p in w.changes[:2]] == pytest.approx([166, 116])
    assert w.inferred_us_per_step == {"held": 0.0, "unexplained": 0.0, "thread": 0.0}


def _step_times(run_dir: Path) -> dict[int, float]:
    """The analyzer's measured step times (§3's windows: each rank's period), per step the
    longest over ranks."""
    out: dict[int, float] = {}
    for s in analyze_run(load_run(run_dir, workers=1)).steps:
        out[s.step] = max(out.get(s.step, 0.0), s.step_time_us)
    return out


def _exposed(run_dir: Path) -> float | None:
    """The analyzer's exposed communication (§4): per step the most of any rank, the mean over
    the steps without the first."""
    per: dict[int, float] = {}
    for s in analyze_run(load_run(run_dir, workers=1)).steps:
        per[s.step] = max(per.get(s.step, 0.0), s.exposed_comm_us)
    vals = [per[k] for k in sorted(per)]
    vals = vals[1:] if len(vals) > 1 else vals
    return sum(vals) / len(vals) if vals else None


@pytest.mark.parametrize(
    "run_dir", SAMPLES + CORPUS + CPU_RUNS, ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_identity_within_one_percent(run_dir):
    """Replaying the unchanged graph gives each step's measured time (its period, §3) within
    1%."""
    inp = prepare(load_run(run_dir, workers=1))
    t0 = time.perf_counter()
    w = predict(inp, [])
    elapsed = time.perf_counter() - t0
    measured = _step_times(run_dir)
    for step, replayed in zip(w.steps, w.replayed_steps_us):
        assert replayed == pytest.approx(measured[step], rel=0.01), step
    # the measured row's exposed communication is §4's: per step the most of any rank, the mean
    # over steps without the first
    exposed = _exposed(run_dir)
    if exposed is not None and w.measured_exposed_comm_us is not None:
        assert w.measured_exposed_comm_us == pytest.approx(exposed, rel=1e-6, abs=0.01)
    assert w.out_of_order == 0
    # the graph, not each activity's own gap, gives the time: each edge kind at its median
    # latency per rank still replays the mean step within 1%
    if w.median_latency_error is not None:
        assert abs(w.median_latency_error) <= 0.01
    assert elapsed < 5.0  # tens of thousands of activities replay in well under a second


def test_identity_names_what_an_incomplete_graph_carries(tmp_path):
    """A comm kernel [0, 100] and a kernel [600, 700] on one stream, no launch calls in the trace,
    nothing on another stream: no edge explains the 500 µs gap. The replay keeps it after the comm
    kernel and says how much time it carries; comm=0.5 ends the comm kernel at 50 and `b` follows
    500 µs later: [550, 650]."""
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -10, 1000)
    r.kernel("ncclDevKernel_AllGather", 0, 100)
    r.kernel("b", 600, 100)
    w = predict(prepare(load_run(write_run(tmp_path / "run", [r]))), [parse_change("comm=0.5")])
    assert w.measured_steps_us == pytest.approx([700])
    assert w.replayed_steps_us == pytest.approx([700])
    assert w.inferred_us_per_step["unexplained"] == pytest.approx(500)
    assert w.changes[0].step_us == pytest.approx([650])


@pytest.mark.parametrize("run_dir", CPU_JOBS, ids=lambda p: p.name)
def test_comm_and_hide_on_cpu_jobs(run_dir):
    """comm=0.5 and hide=all on gloo jobs: each predicts a step no longer than measured, hide=all
    no longer than comm=0.5, and the communication on the critical path (§7's walk over the
    replayed times) shrinks with them. What hide=all leaves there is blocking waits for a rank
    that issued its collective later (the ranks still meet): none on ddp, fsdp2 and pipeline."""
    w = predict(
        prepare(load_run(run_dir, workers=1)),
        [parse_change("comm=0.5"), parse_change("hide=all")],
    )
    half, hide = w.changes[0], w.changes[1]
    assert hide.predicted_step_us <= half.predicted_step_us * 1.0001
    assert half.predicted_step_us <= w.measured_step_us * 1.0001
    assert hide.path["comm_us"] < half.path["comm_us"] < w.measured_path["comm_us"]
    if run_dir.name in ("ddp", "fsdp2", "pipeline"):
        assert hide.path["comm_us"] == 0


def test_pipeline_job_gains_from_hiding_its_sends():
    """The 2-stage pipeline's stages wait for each other's send/recv: hiding them shortens the
    step (the graph links the stages through the matched point-to-point transfers, each side
    arriving when its thread issued it): 74.9 ms against 84.3 ms measured."""
    w = predict(
        prepare(load_run(DATA / "foreign-cpu" / "pipeline", workers=1)), [parse_change("hide=all")]
    )
    assert w.changes[0].predicted_step_us < 0.9 * w.measured_step_us


def test_inferred_time_counts_only_the_profiled_steps(tmp_path):
    """One rank, ProfilerStep#1 [-10, 990] on the CPU: a comm kernel [0, 100] launched at -5,
    `b` launched at 50 starting at 600 on its idle stream (500 µs that no edge explains, in the
    step); then `c` and `d`, launched at 1,050 and 1,060, after the step (no step holds them),
    starting at 1,500 (449 µs after its launch) and 2,100 (500 µs after `c` ends). Only the
    step's 500 µs count: 500 µs per rank and step, not 1,449."""
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -10, 1000)
    r.kernel("ncclDevKernel_AllGather", 0, 100, launch_us=(-5, 1))
    r.kernel("b", 600, 100, launch_us=(50, 1))
    r.kernel("c", 1500, 100, launch_us=(1050, 1))
    r.kernel("d", 2100, 100, launch_us=(1060, 1))
    w = predict(prepare(load_run(write_run(tmp_path / "run", [r]))), [])
    assert w.steps == [1]
    assert w.inferred_us_per_step["unexplained"] == pytest.approx(500)
    # which activity's start the gap delayed
    assert [(n, pytest.approx(us)) for n, us in w.inferred_top["unexplained"]] == [("b", 500)]
    assert w.inferred_top["held"] == [] and w.inferred_top["thread"] == []


def test_exposed_communication_measured_and_predicted(tmp_path):
    """The two-rank trace: rank 0's all-gather [100, 300] and rank 1's [150, 300] have no compute
    beside them: 200 and 150 µs exposed, the most of any rank 200 µs measured. comm=0.5: the
    transfer after the arrival at 150 takes 75 µs, so they end at 225: 125 and 75 µs, at most
    125 µs."""
    inp = prepare(load_run(write_run(tmp_path / "run", _two_ranks())))
    w = predict(inp, [parse_change("comm=0.5")])
    assert w.measured_exposed_comm_us == pytest.approx(200)
    assert w.changes[0].exposed_comm_us == pytest.approx(125)


def test_a_group_is_selected_by_its_description(tmp_path):
    """The two-rank trace with its process group described as `mesh_tp` in `pg_config` (§5's
    label "0 [0,1] mesh_tp"): hide=mesh_tp hides the all-gather as hide=all does, 250 µs; a
    description no group has is refused."""
    ranks = _two_ranks()
    for r in ranks:
        r.pg_config = [{"pg_name": "0", "ranks": [0, 1], "pg_desc": "mesh_tp"}]
    inp = prepare(load_run(write_run(tmp_path / "run", ranks)))
    w = predict(inp, [parse_change("hide=mesh_tp"), parse_change("comm=0.5@MESH_TP")])
    assert w.changes[0].step_us == pytest.approx([250])
    assert w.changes[1].step_us == pytest.approx([325])
    with pytest.raises(ChangeError, match="mesh_dp"):
        predict(inp, [parse_change("hide=mesh_dp")])


def test_exposed_communication_counts_overlapping_comm_once(tmp_path):
    """One rank: comm kernels [100, 300] and [150, 250] on two streams, compute [0, 100] and
    [280, 320]: the comm runs [100, 300], of which [280, 300] beside compute: 180 µs exposed (the
    sum of the kernels less their overlap with compute would say 280)."""
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("ProfilerStep#1", -60, 500)
    r.kernel("a", 0, 100, launch_us=(-50, 1))
    r.kernel("ncclDevKernel_AllReduce", 100, 200, stream=14, launch_us=(-40, 1))
    r.kernel("ncclDevKernel_AllGather", 150, 100, stream=15, launch_us=(-30, 1))
    r.kernel("b", 280, 40, stream=16, launch_us=(-20, 1))
    w = predict(prepare(load_run(write_run(tmp_path / "run", [r]))), [])
    assert w.measured_exposed_comm_us == pytest.approx(180)


@pytest.mark.parametrize("texts", [["link=2.048,10", "comm=0.5"], ["comm=0.5", "link=2.048,10"]])
def test_comm_scales_what_link_gives_in_one_row(tmp_path, texts):
    """The two-rank trace: link=2.048,10 times the all-gather's transfer 11 µs (above); comm=0.5 in
    the same row halves it, typed before or after: 5.5 µs after the arrival at 150, then `b`'s
    100 µs: 255.5 µs."""
    inp = prepare(load_run(write_run(tmp_path / "run", _two_ranks())))
    w = predict(inp, [parse_change(t) for t in texts])
    assert w.changes[-1].step_us == pytest.approx([255.5])


def test_targets_in_a_comma_list(tmp_path):
    """`@A,B` selects what A or B selects; a part that selects nothing is named (the two-rank
    trace has an all-gather and no reduce-scatter)."""
    inp = prepare(load_run(write_run(tmp_path / "run", _two_ranks())))
    w = predict(inp, [parse_change("comm=0.5@all_gather,[0,1]")])  # a kind, a label's text
    assert w.changes[0].step_us == pytest.approx([325])
    with pytest.raises(ChangeError, match="no communication of reduce_scatter"):
        predict(inp, [parse_change("hide=all_gather,reduce_scatter")])
