"""The report's 'compute slowed beside communication' rows, on a trace built with known durations."""

from __future__ import annotations

import pytest

from tests.kineto import Collective, RankTrace, write_run
from tpscope.metrics import analyze_run
from tpscope.report.build import contended_kernels
from tpscope.report.markdown import signature_text
from tpscope.trace import load_run


def test_a_gemm_fifty_percent_slower_beside_an_all_gather(tmp_path):
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.gpu_annotation("ProfilerStep#1", 0, 400)
        for i in range(5):  # alone: 10 µs each (10 over both ranks: the floor's sample count)
            r.kernel("gemm", 10 + 20 * i, 10, grid=(4, 1, 1))
        for i in range(5):  # beside an all-gather on another stream: 15 µs each
            start = 200 + 40 * i
            r.kernel("gemm", start, 15, grid=(4, 1, 1))
            r.kernel(
                "ncclDevKernel_AllGather",
                start - 2,
                20,
                stream=14,
                collective=Collective("_allgather_base", seq=i),
            )
        ranks.append(r)
    analysis = analyze_run(load_run(write_run(tmp_path / "run", ranks)))
    (k,) = contended_kernels(analysis)
    assert k.n_overlapped == 10 and k.isolated_median_us == pytest.approx(10.0)
    assert k.overlapped_median_us == pytest.approx(15.0) and k.slowdown == pytest.approx(0.5)
    # 5 overlapped runs per rank and step, each 5 µs longer than alone
    assert k.tax_us_per_step == pytest.approx(25.0)
    assert signature_text(k.signature).startswith("gemm")


def test_signature_text_keeps_the_dims():
    sig = (
        "nvjet_"
        + "x" * 80
        + "|grid=[2, 66, 1]|block=[384, 1, 1]|dims=[[1024, 8192], [8192, 14336]]"
    )
    text = signature_text(sig)
    assert (
        text.endswith("dims=[[1024, 8192], [8192, 14336]]")
        and "grid" not in text
        and len(text) < 100
    )
