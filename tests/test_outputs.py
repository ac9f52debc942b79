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
    ("analyze", lambda t: t / "a.json", "names the folder to write analysis.json into"),
    ("analyze", lambda t: make_file(t), "exists and is not a folder"),
    ("analyze", lambda t: make_file(t) / "sub", "{t}/afile is a file, not a folder"),
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


def test_analyze_and_whatif_write_their_json_into_the_out_folder(tmp_path, capsys):
    """`--out DIR`: DIR/analysis.json and DIR/whatif.json, the documents `--json` prints; made
    with its parents; kept without --overwrite, replaced with it."""
    import json

    assert main(["analyze", str(RUN), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    out = tmp_path / "a" / "b"
    assert main(["analyze", str(RUN), "--json", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads((out / "analysis.json").read_text()) == printed
    assert main(["whatif", str(RUN), "comm=0.5", "--json", "--out", str(out)]) == 0
    assert json.loads((out / "whatif.json").read_text())["changes"]
    assert capsys.readouterr().err == f"tpscope whatif: wrote {out / 'whatif.json'}\n"
    (out / "analysis.json").write_text("MINE")
    assert main(["analyze", str(RUN), "--json", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "analysis.json already exists" in err and "--overwrite" in err
    assert (out / "analysis.json").read_text() == "MINE"
    assert main(["analyze", str(RUN), "--out", str(out), "--overwrite"]) == 0
    assert "What matters" in capsys.readouterr().out  # without --json the tables print too
    assert json.loads((out / "analysis.json").read_text()) == printed


def test_report_makes_a_missing_out_folder_with_its_parents(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert main(["report", str(RUN), "--out", str(out), "--format", "md"]) == 0
    assert (out / "report.md").read_text().startswith("#")


def test_a_write_the_system_refuses_names_the_file(tmp_path, capsys, monkeypatch):
    import errno

    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    import tpscope.outputs

    monkeypatch.setattr(tpscope.outputs.os, "replace", full_disk)
    out = tmp_path / "analysis.json"
    assert main(["analyze", str(RUN), "--json", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and f"--out {out}: cannot be written (No space left on device)" in err
    )
    assert list(tmp_path.iterdir()) == []  # no temporary file left


@pytest.mark.parametrize(
    "argv",
    [
        lambda run: ["report", str(run), "--out", str(run)],
        lambda run: ["report", str(run), "--out", str(run / "sub")],
        lambda run: [
            "report",
            str(run.parent / "other"),
            "--baseline",
            str(run),
            "--out",
            str(run),
        ],
        lambda run: ["analyze", str(run), "--json", "--out", str(run)],
    ],
    ids=["report-into-run", "report-under-run", "report-into-baseline", "analyze-into-run"],
)
def test_out_inside_an_analysed_run_is_refused(tmp_path, capsys, argv):
    """A report written into the run folder would be read back as one of its files."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    shutil.copytree(RUN, tmp_path / "other")
    before = sorted(p.name for p in run.rglob("*"))
    assert main(argv(run)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "inside the run folder" in err, err
    assert sorted(p.name for p in run.rglob("*")) == before


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    """A write cut short (here: the file-size limit, as a full disk would) leaves the earlier
    report as it was and no partial file beside it."""
    import subprocess
    import sys

    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.md").write_text("OLD")
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))\n"
        "from tpscope.cli import main\n"
        f"sys.exit(main(['report', {str(RUN)!r}, '--out', {str(out)!r}, '--format', 'md',"
        " '--overwrite']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and f"--out {out / 'report.md'}: cannot be written" in (
        done.stderr
    )
    assert (out / "report.md").read_text() == "OLD"
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]


def test_a_folder_name_that_is_not_utf8_is_shown_escaped(tmp_path, capsys, monkeypatch):
    import json
    import os
    import shutil

    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = os.path.join(os.fsencode(tmp_path), b"run\xff")
    shutil.copytree(os.fsencode(RUN), run)
    name = os.fsdecode(run)
    for cache in (["--no-cache"], [], []):  # the analysis cache keys such a name too
        assert main(["analyze", name, "--json", *cache]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["run_dir"].endswith("run\\xff")
    assert main(["analyze", name]) == 0
    assert "run\\xff" in capsys.readouterr().out
    out = tmp_path / "rep"
    assert main(["report", name, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["report.md", "report.json", "report.junit.xml", "report.html"]
    )
    assert "run\\xff" in (out / "report.md").read_text(encoding="utf-8")


def test_a_control_character_in_a_folder_name_keeps_the_junit_xml_valid(tmp_path, capsys):
    import shutil
    import xml.etree.ElementTree as ET

    run = tmp_path / "run\x07\x1b[2Jx"
    shutil.copytree(RUN, run)
    assert main(["report", str(run), "--format", "junit"]) == 0
    root = ET.fromstring(capsys.readouterr().out.encode())
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["candidate"].endswith("run\\x07\\x1b[2Jx")
