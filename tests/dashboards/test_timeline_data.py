"""Timeline windows from a URL or a zoom: any finite number, however large, is a window."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kineto import RankTrace, write_run
from tpscope.dashboards.timeline_data import timeline_data
from tpscope.trace import load_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    r = RankTrace(0, world_size=1)
    for s in (1, 2):
        r.gpu_annotation(f"ProfilerStep#{s}", s * 1000, 500)
        for k in range(4):
            r.kernel("gemm", s * 1000 + 100 * k, 50)
    return load_run(write_run(tmp_path_factory.mktemp("runs") / "run", [r]))


@pytest.mark.parametrize(
    "window",
    [(-1e308, 1e308), (0.0, 1e308), (-1e308, 1e308 * 10), (float("nan"), float("nan"))],
)
def test_a_window_past_any_step_is_the_whole_step(run, window):
    whole = timeline_data(run, 1, [0])
    d = timeline_data(run, 1, [0], window_us=window)
    assert d.view_us == whole.view_us
    np.testing.assert_array_equal(
        np.sort(d.activities["compute"].start_us), np.sort(whole.activities["compute"].start_us)
    )


def test_a_window_far_beyond_the_step_is_the_whole_step(run):
    whole = timeline_data(run, 1, [0])
    for window in ((1e300, 1e308), (-1e308, -1e300)):
        assert timeline_data(run, 1, [0], window_us=window).view_us == whole.view_us
