"""The bundled real H200 runs (sample_traces/h200x2-<regime>-<mode>): a fused run against the
unfused run of its regime gets the verdict that the runtime's own CUDA-event step times (the
manifest, independent of the traces) point to."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tpscope.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
MARGIN = 0.05  # only pairs whose manifest step times differ by more than this have a sure direction


def _pairs() -> list[tuple[Path, Path]]:
    runs = sorted(p for p in SAMPLES.glob("h200x2-*-*") if (p / "tpscope_run.json").is_file())
    out = []
    for unfused in (p for p in runs if p.name.endswith("-none") or p.name.endswith("-unfused")):
        regime = unfused.name.split("-")[1]
        out += [(unfused, p) for p in runs if p != unfused and p.name.split("-")[1] == regime]
    return out


PAIRS = _pairs()


def _median_step_ms(run: Path) -> tuple[float, float]:
    m = json.loads((run / "tpscope_run.json").read_text())
    times = [m["step_times_ms"][i] for i in m["timed_steps"]]
    return statistics.median(times), m["tokens_per_step"]


@pytest.mark.skipif(not PAIRS, reason="no unfused/fused pair of one regime in sample_traces/ yet")
@pytest.mark.parametrize("unfused, fused", PAIRS, ids=[f.name for _, f in PAIRS] or None)
def test_fused_against_unfused_goes_the_way_the_manifest_says(capsys, unfused, fused):
    base_ms, tokens = _median_step_ms(unfused)
    cand_ms, _ = _median_step_ms(fused)
    change = cand_ms / base_ms - 1
    code = main(["report", str(fused), "--baseline", str(unfused), "--fail-on", "peak_memory=off",
                 "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    rows = {c["metric"]: c for c in doc["comparisons"]}
    # tokens/s: the manifest's tokens per step over the median timed step, computed here by hand
    assert rows["tokens_per_s"]["candidate_median"] == pytest.approx(tokens / (cand_ms / 1e3), rel=1e-9)
    if abs(change) < MARGIN:
        pytest.skip(f"{fused.name}: step times within {MARGIN:.0%} of {unfused.name}: no sure direction")
    if change > 0:
        assert code == 1 and rows["tokens_per_s"]["status"] == "regressed"
    else:
        assert rows["tokens_per_s"]["status"] == "improved"
        assert rows["step_time_us"]["status"] in ("improved", "unchanged")


def test_a_sample_run_against_itself_passes(capsys):
    runs = sorted(p for p in SAMPLES.glob("h200x2-*") if p.is_dir()) if SAMPLES.is_dir() else []
    if not runs:
        pytest.skip("no bundled sample runs yet")
    for run in runs:
        assert main(["report", str(run), "--baseline", str(run)]) == 0
        assert "PASS" in capsys.readouterr().out
