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
    runs = sorted(p for p in SAMPLES.glob("h200x2-*-*") if (p / "tpscope_run.jsonc").is_file())
    out = []
    for unfused in (p for p in runs if p.name.endswith("-none") or p.name.endswith("-unfused")):
        regime = unfused.name.split("-")[1]
        out += [(unfused, p) for p in runs if p != unfused and p.name.split("-")[1] == regime]
    return out


PAIRS = _pairs()


def _manifest(run: Path) -> dict:
    return json.loads((run / "tpscope_run.jsonc").read_text())


def _median_step_ms(run: Path) -> float:
    m = _manifest(run)
    return statistics.median(m["step_times_ms"][i] for i in m["timed_steps"])


def test_the_samples_hold_an_unfused_fused_pair():
    assert PAIRS, "sample_traces/ needs an unfused and a fused run of one regime"


@pytest.mark.parametrize("unfused, fused", PAIRS, ids=[f.name for _, f in PAIRS] or None)
def test_fused_against_unfused_goes_the_way_the_manifest_says(capsys, unfused, fused):
    change = _median_step_ms(fused) / _median_step_ms(unfused) - 1
    m = _manifest(fused)
    per_step = [m["tokens_per_step"] / (m["step_times_ms"][i] / 1e3) for i in m["timed_steps"]]
    code = main(
        [
            "report",
            str(fused),
            "--baseline",
            str(unfused),
            "--fail-on",
            "peak_memory=off",
            "--format",
            "json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    rows = {c["metric"]: c for c in doc["comparisons"]}
    # tokens/s: median over the manifest's timed steps of tokens per step / step time, by hand; within
    # 0.01% of the manifest's own figure (tokens over the median step time)
    assert rows["tokens_per_s"]["candidate_median"] == pytest.approx(
        statistics.median(per_step), rel=1e-12
    )
    assert rows["tokens_per_s"]["candidate_median"] == pytest.approx(m["tokens_per_s"], rel=1e-4)
    if abs(change) < 0.02:  # inside the default 3% limit with room to spare: tokens/s must not fail
        assert rows["tokens_per_s"]["status"] != "regressed"
        return
    if abs(change) < MARGIN:  # near the limit: the verdict may go either way, the direction may not
        base = rows["tokens_per_s"]["baseline_median"]
        assert (rows["tokens_per_s"]["candidate_median"] < base) == (change > 0)
        return
    slower, faster = (fused, unfused) if change > 0 else (unfused, fused)
    if change > 0:
        assert code == 1 and rows["tokens_per_s"]["status"] == "regressed"
    else:
        assert code == 0 and rows["tokens_per_s"]["status"] == "improved"
    # and the other way round: the slower run as the candidate fails, the faster one passes
    assert main(["report", str(slower), "--baseline", str(faster)]) == 1
    assert "tokens_per_s" in capsys.readouterr().out.splitlines()[2]
    assert main(["report", str(faster), "--baseline", str(slower)]) == 0
    assert "PASS" in capsys.readouterr().out


def test_a_sample_run_against_itself_passes(capsys):
    runs = sorted(p for p in SAMPLES.glob("h200x2-*") if p.is_dir()) if SAMPLES.is_dir() else []
    assert runs, "no bundled sample runs"
    for run in runs:
        assert main(["report", str(run), "--baseline", str(run)]) == 0
        assert "PASS" in capsys.readouterr().out
