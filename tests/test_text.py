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
