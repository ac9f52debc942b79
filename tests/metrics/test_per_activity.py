"""Per-activity results: a hand-built run whose answer is known (one all-gather that rank 1 reaches
40 µs late), and on a real H200 run the per-activity rows add up to the analyzer's totals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.kineto import RankTrace, late_all_gather_ranks, write_run
from tpscope.metrics import analyze_run, as_json
from tpscope.metrics.per_activity import PATH_KINDS, activity_detail, path_segments
from tpscope.trace import load_run

DATA = Path(__file__).resolve().parents[1] / "data"


def _late_run(tmp_path):
    return load_run(write_run(tmp_path / "late", late_all_gather_ranks(40.0)))


def test_the_late_rank_makes_the_other_wait_40_us(tmp_path):
    d = activity_detail(_late_run(tmp_path))
    ag = np.flatnonzero(d.instance >= 0)
    assert sorted(d.rank[ag].tolist()) == [0, 1] and len(set(d.instance[ag].tolist())) == 1
    waits = {int(d.rank[i]): int(d.wait_ns[i]) for i in ag}
    assert waits == {0: 40_000, 1: 0}
    assert (d.instance == -1).sum() == 2  # the GEMMs belong to no collective


def test_path_segments_follow_time_and_add_up_to_the_analyzers_length(tmp_path):
    run = _late_run(tmp_path)
    seg = path_segments(activity_detail(run), 1)
    assert len(seg.row) > 0 and np.all(np.diff(seg.start_ns) >= 0)
    assert set(seg.category.tolist()) <= set(range(len(PATH_KINDS)))
    length_us = as_json(analyze_run(run))["critical_path"][0]["length_us"]
    assert (seg.end_ns - seg.start_ns).sum() / 1000 == pytest.approx(length_us)
    assert len(path_segments(activity_detail(run), 99).row) == 0  # a step the run does not have


def test_on_a_real_run_waits_add_up_to_the_collectives_table():
    run = load_run(DATA / "h200-shm-chunked4")
    d = activity_detail(run)
    assert len(d) == sum(len(r.gpu) for r in run.ranks)
    doc = as_json(analyze_run(run))
    # per instance the analyzer reports the longest wait of its members (metrics.md §5)
    per_instance: dict[int, int] = {}
    for i in np.flatnonzero(d.instance >= 0):
        per_instance[int(d.instance[i])] = max(
            per_instance.get(int(d.instance[i]), 0), int(d.wait_ns[i])
        )
    got = sorted(v / 1000 for v in per_instance.values())
    want = sorted(c["wait_us"] for c in doc["collectives"])
    assert got == pytest.approx(want, abs=1e-3)


def test_a_run_without_gpu_activity_has_no_detail(tmp_path):
    r = RankTrace(0)
    r.gpu_annotation("ProfilerStep#1", 0, 10)
    assert activity_detail(load_run(write_run(tmp_path / "cpu", [r]))) is None
