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


def test_the_terminal_line_leaves_the_process_single_threaded_so_workers_fork(monkeypatch):
    """Readers and the critical path fork their workers only from a one-thread process: the line
    on a terminal must not start a thread, and is erased when the block ends."""
    import threading

    from tpscope.trace.read.parallel import can_fork

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    before = threading.active_count()
    with working("tpscope: reading \x1b[2Jrun"):
        assert threading.active_count() == before
        assert can_fork() == (before == 1)
    text = tty.getvalue()
    assert text.startswith("tpscope: reading ?[2Jrun ...") and text.endswith("\r")
    assert "\x1b" not in text
