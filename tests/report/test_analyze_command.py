"""`tpscope analyze` on a folder of runs (a TensorBoard log directory, one subfolder per run)."""

from __future__ import annotations

import json

from tests.kineto import Collective, RankTrace, write_run
from tpscope.cli import main


def _run(step_us: float) -> list[RankTrace]:
    ranks = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.gpu_annotation("ProfilerStep#1", 0, step_us)
        r.kernel("gemm", 0, step_us - 50)
        r.kernel(
            "ncclDevKernel_AllGather",
            step_us - 50,
            50,
            stream=14,
            collective=Collective(
                "_allgather_base", in_nelems=4, out_nelems=8, seq=1, on_kernel=True
            ),
        )
        ranks.append(r)
    return ranks


def test_a_folder_of_runs_is_analyzed_run_by_run(tmp_path, capsys):
    logs = tmp_path / "logs"
    write_run(logs / "fast", _run(200))
    write_run(logs / "slow", _run(400))
    assert main(["analyze", str(logs), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert f"run: {logs / 'fast'}" in out and f"run: {logs / 'slow'}" in out
    lines = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.startswith(("fast ", "slow "))
    }
    assert lines["fast"][3] == "200.0" and lines["slow"][3] == "400.0"  # step_us, by construction
    # 50 µs exposed of 200 and 400
    assert lines["fast"][4] == "25.0%" and lines["slow"][4] == "12.5%"
    assert main(["analyze", str(logs), "--no-cache", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc["runs"]) == ["fast", "slow"]
    assert doc["runs"]["slow"]["summary"]["step_time_us"] == 400.0


def test_analyze_says_what_to_run_next(tmp_path, capsys):
    write_run(tmp_path / "run", _run(200))
    assert main(["analyze", str(tmp_path / "run"), "--no-cache"]) == 0
    out = capsys.readouterr().out
    for command in ("tpscope dash", "--reference", "tpscope report"):
        assert command in out.split("next")[-1]
