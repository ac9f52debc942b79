"""`tpscope dash` on a folder of runs: each subfolder is served as a run of its own."""

from __future__ import annotations

import pytest

from tests.kineto import RankTrace, write_run
from tpscope.dashboards.dash_command import resolve_run_dirs
from tpscope.errors import UserError


def _ranks() -> list[RankTrace]:
    out = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.kernel("gemm", 0, 10)
        out.append(r)
    return out


def test_a_folder_of_runs_serves_each_run(tmp_path):
    logs = tmp_path / "logs"
    for name in ("second", "first"):
        write_run(logs / name, _ranks())
    single = write_run(tmp_path / "single", _ranks())
    assert resolve_run_dirs([str(logs), str(single)]) == [logs / "first", logs / "second", single]
    with pytest.raises(UserError, match="no such file"):
        resolve_run_dirs([str(tmp_path / "absent")])
