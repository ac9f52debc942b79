"""Progress goes to a terminal's stderr only: nothing on pipes, files or CI logs."""

from __future__ import annotations

import io
import sys

from tpscope.progress import working


def test_no_progress_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    with working("reading"):
        print("result")
    out, err = capsys.readouterr()
    assert out == "result\n" and err == ""


def test_a_spinner_on_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with working("reading the traces"):
        pass
    assert "reading the traces" in tty.getvalue()
