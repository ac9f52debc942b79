"""metrics.md §9 "Across vendors": the same inference on H100 and MI300X compared by kernel family."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpscope.metrics import analyze_run
from tpscope.metrics.kernel_stats import kernel_times
from tpscope.report.build import RunResults, build_report
from tpscope.report.compare import parse_fail_on
from tpscope.report.kernel_families import by_family, names_differ
from tpscope.trace import load_run

REAL = Path(__file__).resolve().parents[1] / "data" / "real"

# Hand-classified from the kernel names of the two traces: cuBLAS on H100, hipBLASLt (Tensile
# `Cijk_*`) on MI300X; flash attention on H100, the Triton/CK `attn_fwd` on MI300X.
HAND = {
    "GEMM": ("sm90_xmma_gemm", "cutlass_80_simt_sgemm", "Cijk_"),
    "attention": ("pytorch_flash::flash_fwd_kernel", "attn_fwd"),
}


@pytest.fixture(scope="module")
def pair():
    h100, mi300 = (load_run(REAL / f"tracelens-qwen05b-{v}") for v in ("h100", "mi300"))
    return (
        RunResults(analyze_run(h100), kernel_times(h100, "name")),
        RunResults(analyze_run(mi300), kernel_times(mi300, "name")),
    )


def test_other_vendor_kernels_are_compared_by_family(pair):
    h100, mi300 = pair
    assert names_differ(h100.kernels, mi300.kernels)
    assert not names_differ(h100.kernels, h100.kernels)
    for run in pair:
        fam = {k.key: k.us_per_step for k in by_family(run.kernels)}
        # nothing lost
        assert sum(fam.values()) == pytest.approx(sum(k.us_per_step for k in run.kernels))
        for family, prefixes in HAND.items():
            expected = sum(k.us_per_step for k in run.kernels if any(p in k.key for p in prefixes))
            assert expected > 0 and fam[f"{family} (by family)"] == pytest.approx(expected)
    report = build_report(mi300, parse_fail_on(None), h100)
    assert report.kernels and all(k.key.endswith("(by family)") for k in report.kernels)
    # neither communicates
    assert report.flux_overlap_efficiency is None and report.attained_saving is None
