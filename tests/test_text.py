"""Names from traces shown as inert text: in the terminal, in Markdown and in HTML."""

from __future__ import annotations

import re
from pathlib import Path

from tests.kineto import RankTrace, write_run
from tpscope.cli import main
from tpscope.text import md_code, md_text, printable

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m\r\x08"  # retitle, clear screen, C1 CSI, carriage return, backspace
NASTY = "gemm`|<b>x</b>" + ESCAPES


def test_printable_writes_every_control_character_out():
    assert printable(ESCAPES) == "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x0d\\x08"
    assert printable("a\nb\tc") == "a\\x0ab\\x09c"
    assert printable("a\nb", keep_newlines=True) == "a\nb"
    assert printable("void k<float, 4>(ü)") == "void k<float, 4>(ü)"  # ordinary text unchanged
    assert all(not re.search(r"[\x00-\x1f\x7f-\x9f]", printable(chr(c))) for c in range(0x200))


def test_md_code_holds_any_backticks():
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x``") == "``` `x`` ```"
    assert md_code("plain") == "`plain`"


def test_md_text_turns_html_and_code_into_entities():
    assert md_text("<script>&`") == "&lt;script&gt;&amp;&#96;"


def one_rank_run(folder: Path, name: str) -> Path:
    r = RankTrace(0, world_size=1)
    for s in (1, 2, 3):
        r.gpu_annotation(f"ProfilerStep#{s}", s * 100, 100)
        r.kernel(name, s * 100, 50)
    return write_run(folder, [r])


def test_terminal_output_carries_no_control_character(tmp_path, capsys):
    run = one_rank_run(tmp_path / ("run" + ESCAPES), NASTY)
    assert main(["analyze", str(run), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", out)
    assert "run\\x1b]0;pwned\\x07\\x1b[2J" in out


def test_markdown_report_keeps_the_name_in_one_code_span_of_one_cell(tmp_path, capsys):
    run = one_rank_run(tmp_path / "run", NASTY)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", out)
    row = next(line for line in out.splitlines() if "gemm" in line)
    # one code span (fenced by two backticks, the name holds one), the pipe escaped: 4 cells, the last
    # the kernel names behind the shape, escaped as Markdown text
    assert row.startswith("| ``gemm`\\|<b>x</b>\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x0d\\x08`` |"), (
        row
    )
    cells = re.split(r"(?<!\\)\|", row)
    assert len(cells) == 6 and cells[4].strip().startswith(
        "gemm&#96;\\|&lt;b&gt;x&lt;/b&gt;\\x1b]0;pwned"
    ), cells


def test_html_report_escapes_the_name(tmp_path, capsys):
    run = one_rank_run(tmp_path / "run", NASTY)
    assert main(["report", str(run), "--out", str(tmp_path / "out"), "--format", "html"]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    # (plotly.js holds controls)
    shown = [page[m.start() : m.start() + 60] for m in re.finditer("gemm", page)]
    assert shown and not any(re.search(r"[\x00-\x1f\x7f-\x9f]", s) for s in shown), shown


LINK = '<a href="https://evil.example/">k</a> & <b>x</b>'


def test_plotly_text_shows_markup_as_text():
    from tpscope.text import plotly_text

    # plotly.js draws <a>, <b>, <br> in labels and hovers and turns entities back into characters
    assert plotly_text(LINK) == (
        '&lt;a href="https://evil.example/"&gt;k&lt;/a&gt; &amp; &lt;b&gt;x&lt;/b&gt;'
    )
    assert plotly_text("void k<float, 4>\x1b[2J") == "void k&lt;float, 4&gt;\\x1b[2J"


def test_every_string_a_figure_draws_is_escaped_and_its_templates_kept():
    import plotly.graph_objects as go

    from tpscope.text import escape_figure

    fig = go.Figure(
        go.Bar(
            x=[1.0, 2.0],
            y=[LINK, "plain"],
            orientation="h",
            name=LINK,
            text=[LINK, None],
            hovertext=LINK,
            customdata=[[LINK, 3], ["plain", 4]],
            hovertemplate="%{y}<br>%{customdata[0]}<extra></extra>",
        )
    )
    fig.update_yaxes(tickvals=[0], ticktext=[LINK])
    escape_figure(fig)
    t = fig.data[0]
    shown = [*t.y, t.name, *t.text[:1], t.hovertext, t.customdata[0][0], *fig.layout.yaxis.ticktext]
    assert all(s.startswith("&lt;a href") for s in shown if s != "plain"), shown
    assert t.y[1] == "plain" and list(t.x) == [1.0, 2.0] and t.customdata[0][1] == 3
    assert t.hovertemplate == "%{y}<br>%{customdata[0]}<extra></extra>"


def test_html_report_figures_draw_no_link_from_a_kernel_name(tmp_path):
    run = one_rank_run(tmp_path / "run", LINK)
    assert main(["report", str(run), "--out", str(tmp_path / "out"), "--format", "html"]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    # plotly's JSON writes "<" as \u003c: a name that reaches a figure raw shows as \u003ca href
    assert "\\u003ca href" not in page and "&lt;a href" in page


def test_a_manifest_dtype_reaches_the_report_inert(tmp_path, capsys):
    from tests.report.test_loss_check import SAME

    manifest = {**SAME, "dtype": "bf" + ESCAPES + "<b>x</b>", "losses": [2.0, 1.0]}
    run = write_run(tmp_path / "run", [_rank()], manifest)
    for fmt in ("md", "html"):
        assert main(["report", str(run), "--baseline", str(run), "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert not re.search(r"[\x1b\x07\x08\x9b\r]", out), fmt  # (plotly.js holds tabs)
        assert "dtype bf\\x1b]0;pwned" in out and "<b>x</b>" not in out, fmt


def _rank() -> RankTrace:
    r = RankTrace(0, world_size=1)
    for s in (1, 2, 3):
        r.gpu_annotation(f"ProfilerStep#{s}", s * 100, 100)
        r.kernel("gemm", s * 100, 50)
    return r
