"""The `tpscope` command: user mistakes give one line and exit 2; analyze prints tables and JSON."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "data" / "h200-nvlink-unfused"


def tpscope(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tpscope.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "no such file or folder"),
        (lambda p: p.mkdir(), "no trace files"),
        (lambda p: (p.mkdir(), (p / "notes.json").write_text("hello")), "not valid JSON"),
        (
            lambda p: (p.mkdir(), (p / "r.json.gz").write_bytes(gzip.compress(b"{" * 4000)[:30])),
            "broken gzip",
        ),
    ],
    ids=["missing", "empty", "non-trace", "truncated-gzip"],
)
def test_user_errors_print_one_line_and_exit_2(tmp_path, make, message):
    target = tmp_path / "run"
    make(target)
    done = tpscope("analyze", str(target))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(target) in lines[0]
    assert "Traceback" not in done.stderr


def test_analyze_prints_the_step_table_and_summary():
    done = tpscope("analyze", str(RUN))
    assert done.returncode == 0, done.stderr
    assert "Per rank and step" in done.stdout and "hidden / hideable communication" in done.stdout


def test_analyze_json_follows_the_design_contract():
    done = tpscope("analyze", str(RUN), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert {
        "tpscope_version",
        "run_dir",
        "ranks",
        "warnings",
        "steps",
        "critical_path",
        "collectives",
        "clock_offsets_us",
        "summary",
    } <= set(doc)
    assert doc["ranks"] == [0, 1]
    step_fields = {
        "rank",
        "step",
        "step_time_us",
        "compute_us",
        "comm_us",
        "memory_us",
        "idle_us",
        "hidden_comm_us",
        "exposed_comm_us",
        "exposed_comm_ratio",
        "overlap_ratio",
        "hidden_of_hideable_ratio",
        "comm_wait_us",
        "comm_transfer_us",
        "contention_tax_us",
        "contention_slowdown",
    }
    assert all(step_fields <= set(s) for s in doc["steps"]) and len(doc["steps"]) == 6
    assert {
        "step_time_us",
        "exposed_comm_ratio",
        "overlap_ratio",
        "hidden_of_hideable_ratio",
        "critical_path_exposed_comm_ratio",
        "contention_slowdown",
        "tokens_per_s",
    } <= set(doc["summary"])
    assert doc["summary"]["tokens_per_s"] is None  # no manifest: unknown, never a made-up 0


def test_no_command_prints_help_and_exits_2():
    done = tpscope()
    assert done.returncode == 2 and "analyze" in done.stdout


def test_an_internal_error_exits_3_with_one_line_and_the_traceback_in_a_file(
    monkeypatch, capsys, tmp_path
):
    """A bug of ours is neither a regression (1) nor the user's input (2)."""
    from tpscope import cli
    from tpscope.report import report_command

    def broken(*args):
        raise ZeroDivisionError("a bug in the comparison")

    monkeypatch.setattr(report_command, "build", broken)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert cli.main(["report", str(RUN)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "internal error" in err and "Traceback" not in err
    details = Path(err.strip().rsplit("details in ", 1)[1])
    assert details.parent == tmp_path
    assert "ZeroDivisionError: a bug in the comparison" in details.read_text()


def test_a_command_imports_its_own_module_alone():
    """`tpscope analyze` builds its own options only: the other commands' modules (and `run`'s
    options, read from its config's source) are not loaded."""
    code = (
        "import contextlib, io, sys\n"
        "from tpscope.cli import SUBCOMMANDS, main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['analyze', {str(RUN)!r}, '--json', '--no-cache']) == 0\n"
        "print(sorted(n for n, (m, _) in SUBCOMMANDS.items() if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.split() == ["['analyze']"]
    assert tpscope().returncode == 2  # no command: every command's help, as before


def test_help_lists_the_exit_codes():
    for command in ("analyze", "report", "run"):
        done = tpscope(command, "--help")
        text = " ".join(done.stdout.split())
        assert (
            "2 a mistake in the input or the options" in text and "3 an internal error" in text
        ), command


@pytest.mark.parametrize("workers", ["0", "-3"])
def test_analyze_refuses_workers_below_one_instead_of_replacing_them(workers, capsys):
    from tpscope.cli import main

    assert main(["analyze", str(RUN), "--no-cache", "--workers", workers]) == 2
    err = capsys.readouterr().err
    assert err == f"tpscope analyze: error: --workers must be >= 1, not {workers}\n"


@pytest.mark.parametrize("command", ["analyze", "export", "report", "dash"])
def test_an_unknown_option_prints_the_subcommand_s_own_usage(command, capsys):
    from tpscope.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([command, "some-run", "--no-such-option"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: tpscope {command} ")
    assert "unrecognized arguments: --no-such-option" in err.splitlines()[-1]


# Every command's output options: `--out` is always a folder the command writes into (DIR),
# `--json` always a flag; no command has `-o`.
OUTPUT_OPTIONS = {
    "analyze": {"--out": "folder", "--json": "flag"},
    "whatif": {"--out": "folder", "--json": "flag"},
    "bench": {"--out": "folder", "--json": "flag"},
    "report": {"--out": "folder"},
    "export": {"--out": "folder"},
    "run": {"--out": "folder"},
    "sweep": {"--out": "folder"},
    "dash": {},
    "calibrate": {},
}


def _subparsers():
    import argparse

    from tpscope.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_command_s_out_is_a_folder_and_json_a_flag():
    parsers = _subparsers()
    assert set(parsers) == set(OUTPUT_OPTIONS)
    for name, p in parsers.items():
        strings = {s: a for a in p._actions for s in a.option_strings}
        got = {s for s in strings if s in ("--out", "--json", "-o")}
        assert got == set(OUTPUT_OPTIONS[name]), name
        if "--json" in strings:
            assert strings["--json"].nargs == 0 and strings["--json"].const is True, name
        if "--out" in strings:
            out = strings["--out"]
            assert out.nargs is None and out.metavar == "DIR", name
            assert "folder" in (out.help or "") or "here" in (out.help or ""), name
            assert "FILE" not in (out.help or ""), name


@pytest.mark.parametrize("command", ["analyze", "whatif", "bench"])
def test_json_given_a_file_is_refused_with_the_folder_form(command, tmp_path):
    """`--json FILE` and `--out FILE.json`: one line, exit 2, the form to use, nothing written."""
    lead = {"analyze": [str(RUN)], "whatif": [str(RUN)], "bench": ["--device", "cpu"]}[command]
    done = tpscope(command, *lead, "--json", str(tmp_path / "x.json"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--json is a flag" in done.stderr and "--out DIR" in done.stderr
    done = tpscope(command, *lead, "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    name = {"analyze": "analysis.json", "whatif": "whatif.json", "bench": "bench.json"}[command]
    assert name in done.stderr
    assert "folder" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [c for c, o in OUTPUT_OPTIONS.items() if "--out" in o])
def test_an_out_that_is_a_file_is_refused(command, tmp_path):
    """A regular file given as `--out`: one line naming it, exit 2, the file untouched."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    lead = {
        "analyze": [str(RUN)],
        "whatif": [str(RUN)],
        "report": [str(RUN)],
        "export": [str(RUN)],
        "bench": ["--device", "cpu"],
        "run": ["--device", "cpu"],
        "sweep": ["--device", "cpu"],
    }[command]
    done = tpscope(command, *lead, "--out", str(afile))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert str(afile) in done.stderr and "not a folder" in done.stderr, done.stderr
    assert afile.read_text() == "x"
