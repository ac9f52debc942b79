"""docs/ci.md stays true: its workflow is valid YAML whose `tpscope` commands the CLI accepts, and
its shown outputs are what the CLI prints for the same runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.report._runs import stretched_copy
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
    commands = [
        line.strip()
        for s in scripts
        for line in s.splitlines()
        if line.strip().startswith("tpscope ")
    ]
    assert any(c.startswith("tpscope report ") for c in commands)
    parser = build_parser()
    for c in commands:
        argv = shlex.split(c.replace("$RUN_ARGS", doc["env"]["RUN_ARGS"]))[1:]
        args = parser.parse_args(argv)
        assert args.command in ("run", "report")


def _shape(text: str) -> str:
    return re.sub(r"[-+]?\d[\d,.]*", "#", text)


def test_the_shown_verdicts_are_what_the_cli_prints(capsys, tmp_path, monkeypatch):
    """The doc's commands, run from the repository root, print the lines the doc shows."""
    root = DOC.parents[1]
    if not (root / "sample_traces" / "h200x2-shm-none").is_dir():
        pytest.skip("the bundled sample runs are not here")
    monkeypatch.chdir(root)
    text = DOC.read_text()
    shown = 0
    for command, line in re.findall(
        r"^\$ (tpscope report [^|\n]*?)(?: \| sed -n 3p)?\n(.+)$", text, flags=re.M
    ):
        argv = shlex.split(command)[1:]
        if "runs/slower" in command:
            slower = (
                stretched_copy(
                    root / "sample_traces" / "h200x2-nvlink-none",
                    tmp_path / "runs" / "slower",
                    1.10,
                )
                if not (tmp_path / "runs" / "slower").exists()
                else tmp_path / "runs" / "slower"
            )
            argv = [str(slower) if a == "runs/slower" else a for a in argv]
        argv = [str(tmp_path / a) if a.startswith("report-") else a for a in argv]
        main(argv)
        out, err = capsys.readouterr()
        printed = (out + err).replace(str(tmp_path) + "/", "")
        # numbers may move a little when the analyzer improves; the verdict and the metrics it names may not
        assert _shape(line.strip("*")) in _shape(printed.replace("**", "")), (command, line)
        shown += 1
    assert shown >= 5
