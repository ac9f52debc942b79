"""docs/ci.md stays true: its workflow is valid YAML whose `tpscope` commands the CLI accepts, and
its shown outputs are what the CLI prints for the same runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.report._runs import CHUNKED, UNFUSED
from tpscope.cli import build_parser, main

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_workflow_is_valid_yaml_and_its_commands_parse():
    yaml = pytest.importorskip("yaml")
    (workflow,) = _blocks("yaml")
    doc = yaml.safe_load(workflow)
    assert set(doc["jobs"]) == {"baseline", "report"}
    scripts = [s.get("run", "") for job in doc["jobs"].values() for s in job["steps"]]
    commands = [line.strip() for s in scripts for line in s.splitlines() if line.strip().startswith("tpscope ")]
    assert any(c.startswith("tpscope report ") for c in commands)
    parser = build_parser()
    for c in commands:
        argv = shlex.split(c.replace("$RUN_ARGS", doc["env"]["RUN_ARGS"]))[1:]
        args = parser.parse_args(argv)
        assert args.command in ("run", "report")


def test_the_shown_verdicts_are_what_the_cli_prints(capsys):
    text = DOC.read_text()
    main(["report", str(CHUNKED), "--baseline", str(UNFUSED)])
    regression = capsys.readouterr().out.splitlines()[2]
    main(["report", str(UNFUSED), "--baseline", str(CHUNKED)])
    passing = capsys.readouterr().out.splitlines()[2]
    assert regression in text and passing in text
