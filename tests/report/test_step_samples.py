"""Per-step samples of a run (tpscope/report/step_samples.py): the first profiled step is shown
and marked, and no sample holds it, as in `analyze` (metrics.md §3)."""

from tests.kineto import RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.report.build import run_info
from tpscope.report.step_samples import run_samples
from tpscope.trace import load_run


def _run(tmp_path):
    """Steps 1-3 of one rank, a GEMM each: 300 µs (the warm-up), then 100 and 120 µs; each step's
    GPU annotation spans its GEMM, 1,000 µs apart."""
    r = RankTrace(0, world_size=1)
    for k, gemm_us in enumerate((300, 100, 120)):
        r.gpu_annotation(f"ProfilerStep#{k + 1}", 1000 * k, gemm_us)
        r.kernel("gemm", 1000 * k, gemm_us)
    return load_run(write_run(tmp_path / "run", [r]))


def test_the_first_step_is_shown_and_in_no_sample(tmp_path):
    a = analyze_run(_run(tmp_path))
    s = run_samples(a)
    assert s.steps == (1, 2, 3)
    assert s.first_step == 1 and s.first_step_time_us == 300
    # steps 2 and 3 partition the time after step 1's end (300 µs): 1,100 - 300 and 2,120 - 1,100
    assert s.get("step_time_us").tolist() == [800, 1020]
    assert s.get("compute_us").tolist() == [100, 120]
    # the one step time of the run: analyze's mean over the steady steps is the report's median
    assert a.summary.step_time_us == (800 + 1020) / 2
    info = run_info(a, s)
    assert info.first_step == 1 and info.first_step_time_us == 300
