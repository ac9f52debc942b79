"""`--out` that cannot be written: one line naming the option and the path, exit 2, nothing done."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fusion._cli import TINY_MODEL
from tpscope.cli import main

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "data" / "h200-nvlink-unfused"
TINY_RUN = ["--device", "cpu", *TINY_MODEL, "--steps", "4", "--profile-steps", "1"]
COMMANDS = {
    "analyze": lambda out: ["analyze", str(RUN), "--json", "--no-cache", "--out", out],
    "report": lambda out: ["report", str(RUN), "--out", out],
    "run": lambda out: ["run", *TINY_RUN, "--out", out],
}


def make_file(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_text("x")
    return tmp_path / "afile"


# (command, what --out is, words of the one line)
CASES = [
    ("analyze", lambda t: t / "missing" / "a.json", "folder {t}/missing does not exist"),
    ("analyze", lambda t: t, "is a folder; give a file name"),
    ("analyze", lambda t: make_file(t) / "a.json", "{t}/afile is a file, not a folder"),
    ("report", lambda t: make_file(t), "exists and is not a folder"),
    ("report", lambda t: make_file(t) / "sub", "{t}/afile is a file, not a folder"),
    ("run", lambda t: make_file(t), "exists and is not a folder"),
    ("run", lambda t: make_file(t) / "sub" / "deeper", "{t}/afile is a file, not a folder"),
]


@pytest.mark.parametrize(
    "command, where, words", CASES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(CASES)]
)
def test_an_unwritable_out_is_one_line_and_exit_2(tmp_path, capsys, command, where, words):
    out = where(tmp_path)
    assert main(COMMANDS[command](str(out))) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert f"--out {out}" in captured.err and words.format(t=tmp_path) in captured.err, captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["afile"])  # nothing was written


def test_report_makes_a_missing_out_folder_with_its_parents(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert main(["report", str(RUN), "--out", str(out), "--format", "md"]) == 0
    assert (out / "report.md").read_text().startswith("#")


def test_a_write_the_system_refuses_names_the_file(tmp_path, capsys, monkeypatch):
    import errno

    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    out = tmp_path / "a.json"
    assert main(["analyze", str(RUN), "--json", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and f"--out {out}: cannot be written (No space left on device)" in err
    )
