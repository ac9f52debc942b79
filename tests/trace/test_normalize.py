"""Normalization (metrics.md §1): ns times, lanes, old formats, collective metadata."""

import gzip
import json

import numpy as np

from tests.kineto import BASE_NS, OLD_BASE_US, Collective, RankTrace, write_run
from tpscope.trace import ActivityClass, load_run

NCCL = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def test_times_are_absolute_int64_ns(tmp_path):
    r = RankTrace(0, world_size=1)
    r.kernel("gemm", 1234.567, 10.001)
    g = load_run(write_run(tmp_path / "run", [r])).ranks[0].gpu
    assert g.start_ns.dtype == np.int64
    assert g.start_ns[0] == BASE_NS + 1_234_567
    assert g.end_ns[0] - g.start_ns[0] == 10_001


def test_old_format_absolute_integer_us_is_exact(tmp_path):
    r = RankTrace(0, world_size=1)
    r.kernel("gemm", 7, 3)
    g = load_run(write_run(tmp_path / "run", [r], old_format=True)).ranks[0].gpu
    assert g.start_ns[0] == (OLD_BASE_US + 7) * 1000  # exact: no float rounding at 1.7e18 ns
    assert g.end_ns[0] == (OLD_BASE_US + 10) * 1000


def test_string_pids_and_old_kernel_names(tmp_path):
    doc = {
        "distributedInfo": {"rank": 0, "world_size": 1},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "ncclKernel_AllReduce_RING_LL_Sum_float",
                "pid": "0",
                "tid": "stream 7",
                "ts": 100,
                "dur": 50,
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "gemm",
                "pid": "0",
                "tid": "stream 8",
                "ts": 100,
                "dur": 20,
            },
        ],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    rank = load_run(path).ranks[0]
    assert len(rank.lanes) == 2  # two distinct string tids, two lanes
    assert sorted(rank.gpu.cls.tolist()) == [ActivityClass.COMPUTE, ActivityClass.COMM]


def test_lanes_from_device_and_stream(tmp_path):
    r = RankTrace(0, world_size=1, device=3)
    r.kernel("a", 0, 1, stream=7)
    r.kernel("b", 2, 1, stream=14)
    r.kernel("c", 4, 1, stream=7)
    rank = load_run(write_run(tmp_path / "run", [r])).ranks[0]
    assert sorted(map(tuple, rank.lanes.tolist())) == [(3, 7), (3, 14)]
    lanes = rank.lanes[rank.gpu.lane]
    assert lanes[:, 1].tolist() == [7, 14, 7]


def test_collective_metadata_from_cpu_op_and_from_kernel_args(tmp_path):
    r = RankTrace(0, world_size=2)
    r.kernel(
        NCCL, 10, 5, stream=14, collective=Collective("_allgather_base", in_nelems=4, out_nelems=8)
    )
    r.kernel(
        NCCL,
        20,
        5,
        stream=14,
        collective=Collective("allreduce", 16, 16, dtype="Float", seq=7, on_kernel=True),
    )
    # not comm: no metadata
    r.kernel("gemm_in_a_comm_op", 30, 5, collective=Collective("allreduce"))
    rank = load_run(write_run(tmp_path / "run", [r])).ranks[0]
    g, sym = rank.gpu, rank.symbols
    assert [sym[i] for i in g.coll_name_id[:2]] == ["_allgather_base", "allreduce"]
    assert g.in_nelems[:2].tolist() == [4, 16] and g.out_nelems[:2].tolist() == [8, 16]
    assert sym[g.dtype_id[1]] == "Float" and g.seq.tolist()[:2] == [-1, 7]
    assert g.coll_name_id[2] == -1


def test_events_without_times_are_dropped_with_a_warning(tmp_path):
    doc = {
        "distributedInfo": {"rank": 0, "world_size": 1},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ok",
                "ts": 1,
                "dur": 2,
                "args": {"device": 0, "stream": 7},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "no_ts",
                "dur": 2,
                "args": {"device": 0, "stream": 7},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "negative",
                "ts": 1,
                "dur": -2,
                "args": {"device": 0, "stream": 7},
            },
        ],
    }
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    run = load_run(path)
    assert len(run.ranks[0].gpu) == 1
    assert any("2 GPU activities" in w for w in run.warnings)


def test_real_h200_trace_joins_collectives_through_launches():
    run = load_run("tests/data/h200-nvlink-unfused")
    for rank in run.ranks:
        g = rank.gpu
        comm = g.cls == ActivityClass.COMM
        described = comm & (g.coll_name_id >= 0)
        # every NCCL kernel launched inside the profiled window carries its collective
        launched = comm & (g.launch_start_ns >= 0)
        assert launched.sum() > 0 and np.array_equal(described, launched)
        names = {rank.symbols[i] for i in g.coll_name_id[described]}
        assert names == {"_allgather_base", "_reduce_scatter_base"}


def test_copies_launched_inside_a_transfer_range_are_communication(tmp_path):
    # metrics.md §2 "Copies that carry a transfer": host_staged's device -> host and host -> device
    # copies are launched inside its stage_out / stage_in ranges on the launching thread.
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("tpscope/fc1/ag_gemm/stage_out", 30, 20)
    r.cpu_annotation("tpscope/fc1/ag_gemm/stage_in", 180, 20)
    r.cpu_annotation("tpscope/fc1/ag_gemm/chunk0", 0, 10)
    r.kernel("gemm", 0, 100, launch_us=(2, 1))
    inside_out = r.memcpy("Memcpy DtoH (Device -> Pinned)", 50, 100, stream=20, launch_us=(40, 2))
    inside_in = r.memcpy("Memcpy HtoD (Pinned -> Device)", 200, 60, stream=21, launch_us=(190, 2))
    outside = r.memcpy("Memcpy DtoH (Device -> Pinned)", 300, 20, stream=20, launch_us=(290, 2))
    other_thread = r.memcpy(
        "Memcpy HtoD (Pinned -> Device)", 330, 10, stream=21, launch_us=(185, 2)
    )
    # the last copy's launch call runs on another thread, inside no transfer range of its own
    launch = next(e for e in reversed(r.events) if e.get("cat") == "cuda_runtime")
    launch["tid"] = 200
    g = load_run(write_run(tmp_path / "run", [r])).ranks[0].gpu
    cls = dict(zip(g.correlation.tolist(), g.cls.tolist()))
    assert cls[inside_out] == ActivityClass.COMM and cls[inside_in] == ActivityClass.COMM
    assert cls[outside] == ActivityClass.MEMORY and cls[other_thread] == ActivityClass.MEMORY
    assert int((g.cls == ActivityClass.COMPUTE).sum()) == 1


def test_a_range_that_only_resembles_a_transfer_range_changes_nothing(tmp_path):
    r = RankTrace(0, world_size=1)
    r.cpu_annotation("mylib/stage_out", 30, 20)  # not tpscope's
    r.cpu_annotation("tpscope/fc1/ag_gemm/stage_out_extra", 60, 20)  # not a transfer range's suffix
    a = r.memcpy("Memcpy DtoH (Device -> Pinned)", 50, 10, stream=20, launch_us=(40, 2))
    b = r.memcpy("Memcpy DtoH (Device -> Pinned)", 90, 10, stream=20, launch_us=(70, 2))
    g = load_run(write_run(tmp_path / "run", [r])).ranks[0].gpu
    cls = dict(zip(g.correlation.tolist(), g.cls.tolist()))
    assert cls[a] == ActivityClass.MEMORY and cls[b] == ActivityClass.MEMORY


def test_lane_numbers_of_string_pids_and_tids():
    from tpscope.trace.read.extract import lane_number

    assert [lane_number(v) for v in (7, " 12 ", "-3", None)] == [7, 12, -3, -1]
    assert lane_number("\u20038\n") == 8  # a blank int() strips, outside ASCII too
    # not decimal numbers: named lanes, hashed far from real ones ("²" is a digit int() refuses,
    # and \x1f a blank for str.isspace that int() does not strip)
    named = [lane_number(v) for v in ("²", "--5", "-", "stream 7", "1" * 20, "0\x1f")]
    assert all(n >= 1 << 40 for n in named) and len(set(named)) == len(named)
    assert lane_number("stream 7") == lane_number("stream 7")
