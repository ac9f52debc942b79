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
    assert marks["text"][0] == f"{w.measured_step_us:,.0f} µs (1.000x)"
    # the axis leaves room right of the longest mark for its label
    assert fig["layout"]["xaxis"]["range"][1] >= 1.25 * max(marks["x"])


def test_bad_change_is_one_line(server):
    out = _ask(server, "fuse=magic")
    assert "fuse=magic" in out["whatif-note"]["children"]
    assert "internal error" not in str(out)
