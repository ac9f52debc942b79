"""Every view of every folder we have (real sample runs, the H200 corpus runs, HTA's odd traces,
a folder that is no run): one clear line or a figure, never an internal error, and the app keeps
serving. Callbacks are called over HTTP as the browser calls them."""

from __future__ import annotations

import logging

import pytest
import requests

from tests.dashboards.conftest import DATA, Served
from tpscope.samples import sample_runs

pytestmark = pytest.mark.timeout(240)

VIEWS = {  # callback outputs, as the page's layout declares them
    "timeline": [("timeline-graph", "figure"), ("timeline-note", "children")],
    "breakdown": [("breakdown-graph", "figure"), ("critical-path-graph", "figure")],
    "collectives": [
        ("collectives-table", "rowData"),
        ("collectives-table", "columnDefs"),
        ("skew-graph", "figure"),
        ("arrival-graph", "figure"),
        ("collectives-note", "children"),
    ],
    "contention": [
        ("contention-graph", "figure"),
        ("comm-contention-graph", "figure"),
        ("tax-graph", "figure"),
        ("contention-note", "children"),
    ],
}
RUN_OUTPUTS = [
    ("step-select", "options"),
    ("step-select", "value"),
    ("rank-select", "options"),
    ("rank-select", "value"),
    ("baseline-select", "value"),
    ("step-strip", "figure"),
    ("run-warnings", "children"),
    ("run-error", "children"),
]
RUN_STATE = [("want", "data", None)]
EXPORT_OUTPUTS = [("perfetto-download", "data"), ("timeline-note", "children")]


def call(
    url: str,
    outputs: list[tuple[str, str]],
    inputs: list[tuple[str, str, object]],
    state: list[tuple[str, str, object]] = (),
    key: str | None = None,
) -> dict:
    """POST one callback like dash-renderer does; the response's {id: {prop: value}}. `key`: the
    callback's id where an output is shared (Dash adds a hash)."""
    body = {
        "output": key or ".." + "...".join(f"{i}.{p}" for i, p in outputs) + "..",
        "outputs": [{"id": i, "property": p} for i, p in outputs],
        "inputs": [{"id": i, "property": p, "value": v} for i, p, v in inputs],
        "state": [{"id": i, "property": p, "value": v} for i, p, v in state],
        "changedPropIds": [f"{inputs[0][0]}.{inputs[0][1]}"],
    }
    r = requests.post(url + "_dash-update-component", json=body, timeout=60)
    assert r.status_code in (200, 204), r.text[:300]
    return r.json()["response"] if r.status_code == 200 else {}


def _folders(tmp_path_factory) -> list:
    odd = sorted({p.parent for p in (DATA / "hta").rglob("*") if p.is_file()})
    empty = tmp_path_factory.mktemp("odd") / "empty-folder"
    empty.mkdir()
    return (
        sample_runs() + [DATA / "h200-nvlink-unfused", DATA / "h200-shm-chunked4"] + odd + [empty]
    )


@pytest.fixture(scope="module")
def served_all(tmp_path_factory):
    from tpscope.dashboards.app import create_app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    folders = _folders(tmp_path_factory)
    app = create_app(folders, cache_dir=tmp_path_factory.mktemp("cache"))
    server = Served(app)
    yield server, app.server.config["TPSCOPE_STORE"]
    server.stop()


def test_every_view_of_every_folder_answers_without_internal_error(served_all):
    server, store = served_all
    assert len(store.run_ids) >= 10
    loaded = 0
    for run_id in store.run_ids:
        res = call(server.url, RUN_OUTPUTS, [("run-select", "value", run_id)], RUN_STATE)
        error = res["run-error"]["children"]
        assert "internal error" not in error and "\n" not in error, (run_id, error)
        steps = [o["value"] for o in res["step-select"]["options"]]
        ranks = res["rank-select"]["value"]
        if error:
            assert steps == [] and ranks == []
        else:
            loaded += 1
        step = steps[0] if steps else None
        inputs = {
            "timeline": [
                ("run-select", "value", run_id),
                ("step-select", "value", step),
                ("rank-select", "value", ranks),
                ("zoom", "data", None),
                ("selection", "data", {"run": run_id, "step": step, "kind": "search", "key": "a"}),
                ("timeline-options", "value", ["launches"]),
                ("tabs", "value", "timeline"),
            ],
            "breakdown": [
                ("run-select", "value", run_id),
                ("rank-select", "value", ranks),
                ("tabs", "value", "breakdown"),
            ],
            "collectives": [
                ("run-select", "value", run_id),
                ("step-select", "value", step),
                ("tabs", "value", "collectives"),
            ],
            "contention": [
                ("run-select", "value", run_id),
                ("baseline-select", "value", None),
                ("rank-select", "value", ranks),
                ("tabs", "value", "contention"),
            ],
        }
        for view, outputs in VIEWS.items():
            out = call(server.url, outputs, inputs[view])
            text = str(out)
            assert "internal error" not in text, (run_id, view, text[:300])
            if error:  # the folder's one line, in every view's "not available" figure
                assert error in text, (run_id, view)
        if steps:  # the step as a trace for Perfetto
            export_key = next(
                k for k in server.app.callback_map if k.startswith("..perfetto-download.data")
            )
            out = call(
                server.url,
                EXPORT_OUTPUTS,
                [("perfetto-button", "n_clicks", 1)],
                [
                    ("run-select", "value", run_id),
                    ("step-select", "value", step),
                    ("rank-select", "value", ranks),
                ],
                key=export_key,
            )
            assert (
                "internal error" not in str(out)[:2000]
                and out["perfetto-download"]["data"]["content"]
            ), run_id
    assert loaded >= len(sample_runs()) + 2
    # HTA's view: a trace HTA refuses gives its one line; one it reads gives its frames
    hta_outputs = [
        ("hta-temporal-graph", "figure"),
        ("hta-idle-graph", "figure"),
        ("hta-figures", "style"),
        ("hta-note", "children"),
        ("hta-status", "children"),
    ]
    hta_key = next(
        k for k in server.app.callback_map if k.startswith("..hta-temporal-graph.figure")
    )
    for folder, ok in (("cpu_only", False), ("amd_trace", True)):
        out = call(
            server.url,
            hta_outputs,
            [("run-select", "value", folder), ("tabs", "value", "hta")],
            key=hta_key,
        )
        note = out["hta-note"]["children"]
        refused = "HTA could not analyze this run" in note or "not run on a CPU run" in note
        assert refused != ok and "\n" not in note, (folder, note)
        assert out["hta-status"]["children"] == ""  # "HTA is parsing ..." no longer shown
        assert (len(out["hta-temporal-graph"]["figure"]["data"]) > 0) == ok
        # the refusal is said once: the empty figures are hidden, not drawn with the same words
        assert (out["hta-figures"]["style"] == {"display": "none"}) == refused, folder
    # the app still serves a good run after all of that
    res = call(server.url, RUN_OUTPUTS, [("run-select", "value", store.run_ids[0])], RUN_STATE)
    assert res["run-error"]["children"] == ""
