"""The callbacks' own rules: every figure they return draws names from traces as text (plotly.js
reads labels and hovers as HTML), and a click reads those names back as the data held them."""

from __future__ import annotations

import plotly.graph_objects as go

from tpscope.dashboards.callbacks import _point, guarded
from tpscope.errors import UserError

LINK = '<a href="https://evil.example/">gemm</a>'


def _figure() -> go.Figure:
    return go.Figure(
        go.Bar(x=[1.0], y=[LINK], orientation="h", customdata=[[LINK]], hovertext=[LINK])
    )


def test_figures_from_a_callback_draw_no_link():
    fig, note = guarded(2, (0,))(lambda: (_figure(), LINK))()
    t = fig.data[0]
    assert (
        t.y[0]
        == t.customdata[0][0]
        == t.hovertext[0]
        == ('&lt;a href="https://evil.example/"&gt;gemm&lt;/a&gt;')
    )
    assert note == LINK  # text outside figures: Dash writes it as text
    assert guarded(1, (0,))(_figure)().data[0].y[0].startswith("&lt;a")


def test_a_click_reads_the_name_back():
    fig = guarded(1, (0,))(_figure)()
    t = fig.data[0]
    click = {"points": [{"y": t.y[0], "customdata": list(t.customdata[0]), "x": 1.0}]}
    assert _point(click) == {"y": LINK, "customdata": [LINK], "x": 1.0}


def test_a_message_naming_a_file_draws_no_link():
    def fails():
        raise UserError(f"{LINK}: no such file or folder")

    fig, note = guarded(2, (0,))(fails)()
    assert fig.layout.annotations[0].text.startswith("&lt;a href=")
    assert note.startswith(LINK)
