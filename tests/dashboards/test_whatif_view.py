"""The What-if tab, called over HTTP as the browser calls it: the identity and a change on a run
folder, one clear line for a bad CHANGE, and the figure built from a prediction."""

from __future__ import annotations

import logging

import pytest

from tests.dashboards.conftest import UNFUSED, Served
from tests.dashboards.test_every_folder import call

OUTPUTS = [("whatif-graph", "figure"), ("whatif-note", "children")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tpscope.dashboards.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = create_app([UNFUSED], cache_dir=tmp_path_factory.mktemp("cache"))
    s = Served(app)
    yield s
    s.stop()


def _ask(server, text):
    return call(
        server.url,
        OUTPUTS,
        [
            ("run-select", "value", UNFUSED.name),
            ("whatif-changes", "value", text),
            ("tabs", "value", "whatif"),
        ],
    )


def test_identity_and_a_change(server):
    from tpscope.metrics.whatif import predict, prepare
    from tpscope.metrics.whatif_changes import parse_change
    from tpscope.trace import load_run

    out = _ask(server, "hide=all")
    note = out["whatif-note"]["children"]
    assert note.startswith("Identity: the unchanged graph replays the measured")
    fig = out["whatif-graph"]["figure"]
    marks = next(t for t in fig["data"] if t.get("name") == "step time")
    assert marks["y"] == ["measured", "hide=all"]
    w = predict(prepare(load_run(UNFUSED, workers=1)), [parse_change("hide=all")])
    # in µs, as every other view and `tpscope whatif` write it
    assert marks["x"] == pytest.approx([w.measured_step_us, w.changes[0].predicted_step_us])
    assert fig["layout"]["xaxis"]["title"]["text"] == "µs per step"
    assert marks["text"][0].startswith(f"{w.measured_step_us:,.0f} µs (1.000x) · ")
    # the axis leaves room right of the longest mark for its label
    assert fig["layout"]["xaxis"]["range"][1] >= 1.25 * max(marks["x"])


def test_bad_change_is_one_line(server):
    out = _ask(server, "fuse=magic")
    assert "fuse=magic" in out["whatif-note"]["children"]
    assert "internal error" not in str(out)


def test_each_row_shows_its_exposed_communication_and_tokens():
    """Beside each row's step time its exposed communication (§4: per step the most of any rank,
    the mean without the first step, from the analyzer for the measured row) and, on hover, its
    tokens/s (§11: the manifest's tokens/s scaled by measured over predicted step time)."""
    from pathlib import Path

    from tests.metrics.test_replay import _exposed
    from tpscope.dashboards.whatif_view import whatif_figure
    from tpscope.metrics.whatif import predict, prepare
    from tpscope.metrics.whatif_changes import parse_change
    from tpscope.trace import load_run

    run_dir = Path(__file__).resolve().parents[2] / "sample_traces" / "h200x2-nvlink-none"
    run = load_run(run_dir, workers=1)
    w = predict(prepare(run), [parse_change("hide=all")], tokens_per_s=run.manifest.tokens_per_s)
    marks = next(t for t in whatif_figure(w).data if t.name == "step time")
    exposed = _exposed(run_dir)
    assert marks.text[0].endswith(f" · {exposed:,.0f} exposed")
    assert f"exposed communication {exposed:,.1f} µs" in marks.customdata[0]
    measured_tps = run.manifest.tokens_per_s
    assert f"{measured_tps:,.0f} tokens/s" in marks.customdata[0]
    tps = measured_tps * marks.x[0] / marks.x[1]
    assert f"{tps:,.0f} tokens/s" in marks.customdata[1]
