"""GPU time per step by kernel name and by collective, on small traces with known intervals."""

from __future__ import annotations

import pytest

from tests.kineto import Collective, RankTrace, run_ahead_rank, write_run
from tpscope.metrics.kernel_stats import by_collective, kernel_times
from tpscope.trace import load_run

AG = Collective("_allgather_base", in_nelems=1024, out_nelems=2048, dtype="BFloat16")  # 4 KiB out
RS = Collective("_reduce_scatter_base", in_nelems=4096, out_nelems=2048, dtype="Float")  # 16 KiB in


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    r0, r1 = RankTrace(0), RankTrace(1)
    for r in (r0, r1):
        r.gpu_annotation("ProfilerStep#1", 0, 100)
        r.gpu_annotation("ProfilerStep#2", 100, 100)
    r0.kernel("gemm", 10, 30)  # step 1: 30
    r0.kernel("gemm", 110, 40)  # step 2: 40
    r0.kernel("gemm", 90, 30)  # split at the windows' edge: 10 in step 1, 20 in step 2
    r0.kernel("gemm", 250, 10)  # outside every step: left out
    r0.kernel("ncclDevKernel_AllGather", 40, 20, stream=14, collective=AG)
    r0.kernel("ncclDevKernel_AllGather", 150, 10, stream=14, collective=AG)
    r1.kernel("gemm", 10, 50)  # step 1
    r1.kernel("ncclDevKernel_ReduceScatter", 120, 6, stream=14, collective=RS)
    r1.kernel("ncclDevKernel_ReduceScatter", 130, 6, stream=14, collective=RS)
    return load_run(write_run(tmp_path_factory.mktemp("k") / "run", [r0, r1]))


def test_time_per_rank_and_step_by_name(run):
    times = {k.key: k for k in kernel_times(run)}
    gemm = times["gemm"]
    # 4 rank-steps; gemm: 30 + 40 + 30 (r0) + 50 (r1) = 150 µs; counted once each, by midpoint
    assert gemm.us_per_step == pytest.approx(150 / 4)
    assert gemm.count_per_step == pytest.approx(4 / 4)
    # step 1: (30 + 10 + 50) / 2 ranks; step 2: (40 + 20) / 2 ranks
    assert gemm.us_by_step == pytest.approx((45.0, 30.0))
    assert gemm.activity_class == "compute"
    assert times["ncclDevKernel_AllGather"].us_per_step == pytest.approx(30 / 4)
    assert times["ncclDevKernel_AllGather"].activity_class == "comm"
    assert list(times)[0] == "gemm"  # most time first


def test_collectives_by_shape_and_merged_by_name(run):
    shapes = {k.key: k for k in kernel_times(run, "collective")}
    assert set(shapes) == {"_allgather_base 4 KiB", "_reduce_scatter_base 16 KiB"}
    assert shapes["_allgather_base 4 KiB"].bytes == 2048 * 2
    assert shapes["_reduce_scatter_base 16 KiB"].bytes == 4096 * 4
    merged = {k.key: k for k in by_collective(kernel_times(run, "collective"))}
    assert merged["_reduce_scatter_base"].us_per_step == pytest.approx(12 / 4)
    assert merged["_reduce_scatter_base"].detail == "0.5 x 16 KiB"
    assert merged["_allgather_base"].us_by_step == pytest.approx((10.0, 5.0))


def test_bad_grouping_is_refused(run):
    with pytest.raises(ValueError):
        kernel_times(run, "grid")


def _gemm_run(folder, kernel: str, us: float):
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        for step in (1, 2, 3):
            r.gpu_annotation(f"ProfilerStep#{step}", 1000 * step, 500)
            r.kernel(kernel, 1000 * step, us, input_dims=[[64, 32], [32, 16]], cpu_op="aten::mm")
            r.kernel(
                "elementwise_kernel",
                1000 * step + 200,
                20,
                input_dims=[[64, 16]],
                cpu_op="aten::gelu",
            )
        ranks.append(r)
    return load_run(write_run(folder, ranks))


def test_a_renamed_kernel_is_compared_with_the_one_it_replaced(tmp_path):
    """The GEMM of one aten::mm shape went from sm90_xmma_gemm (100 µs) to nvjet_gemm (112 µs): one
    row of +12 µs naming both, not +112 from nothing with the old kernel left out."""
    from tpscope.metrics.kernel_stats import kernel_names
    from tpscope.report.build import kernel_deltas

    base, cand = (
        _gemm_run(tmp_path / "b", "sm90_xmma_gemm", 100),
        _gemm_run(tmp_path / "c", "nvjet_gemm", 112),
    )
    shapes = {k.key: k for k in kernel_times(cand, "shape")}
    assert set(shapes) == {"aten::mm [M, 32] [32, 16]", "aten::gelu [M, 16]"}
    assert shapes["aten::mm [M, 32] [32, 16]"].us_per_step == pytest.approx(112)
    (delta,) = kernel_deltas(
        kernel_times(base, "shape"),
        kernel_times(cand, "shape"),
        names=(kernel_names(base), kernel_names(cand)),
    )
    assert delta.key == "aten::mm [M, 32] [32, 16]" and delta.activity_class == "compute"
    assert (delta.baseline_us, delta.candidate_us, delta.delta_us) == pytest.approx((100, 112, 12))
    assert delta.kernels == "sm90_xmma_gemm → nvjet_gemm"


def test_row_chunks_of_one_gemm_keep_its_shape(tmp_path):
    """A GEMM cut into 4 row chunks written into an output (as chunked fusion does) has the shape
    of the whole GEMM."""
    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 1000)
    # mm.out: a third input
    r.kernel("gemm_whole", 0, 100, input_dims=[[64, 32], [32, 16]], cpu_op="aten::mm")
    for k in range(4):
        r.kernel(
            "gemm_chunk",
            200 + 50 * k,
            30,
            input_dims=[[16, 32], [32, 16], [16, 16]],
            cpu_op="aten::mm",
        )
    (gemm,) = kernel_times(load_run(write_run(tmp_path / "run", [r])), "shape")
    assert gemm.key == "aten::mm [M, 32] [32, 16]" and gemm.us_per_step == pytest.approx(
        100 + 4 * 30
    )


def test_a_huge_kernel_name_costs_its_size_not_its_size_per_kernel(tmp_path):
    """200 kernels and one named by 8 MiB: a fixed-width label array would pad all 201 labels to
    8 Mi characters (6.7 GB); the report must run in a 3 GiB address space, in a process of its own."""
    import resource
    import subprocess
    import sys

    r = RankTrace(0, world_size=1)
    r.gpu_annotation("ProfilerStep#1", 0, 1000)
    for k in range(200):
        r.kernel(f"kernel_{k}", k * 4, 2)
    huge = "k" * (8 << 20)
    r.kernel(huge, 900, 50)
    run = write_run(tmp_path / "run", [r])

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys; from tpscope.metrics.kernel_stats import kernel_times; from tpscope.trace import load_run;"
                "k = kernel_times(load_run(sys.argv[1])); print(len(k), max(len(x.key) for x in k))"
            ),
            str(run),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["201", str(len(huge))]


def test_a_run_ahead_loop_keeps_every_kernel_microsecond_once(tmp_path):
    """Steps partition the timeline (metrics.md §3): summed over the steps, each kernel name's time
    is its total duration in the raw JSON, though prefetch copies run in earlier steps' windows."""
    r = run_ahead_rank(6)
    run = load_run(write_run(tmp_path / "run", [r]))
    totals: dict[str, float] = {}
    for e in r.document()["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy"):
            totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"]
    times = {k.key: k for k in kernel_times(run)}
    assert set(times) == set(totals)
    for name, total in totals.items():
        assert sum(times[name].us_by_step) == pytest.approx(total)
        assert times[name].count_per_step == pytest.approx(1.0)
