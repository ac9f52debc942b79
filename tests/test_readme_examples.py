"""README's Quick start, run for real: its CPU workflow commands (two `tpscope run --device cpu`,
`analyze`, `report`; not `dash`) in a temporary folder, and each output block README shows
compared with what the commands print, by SHAPE: numbers replaced by `#`, runs of spaces and table
rules by one, as tests/report/test_ci_doc.py does for docs/ci.md.

Timings on a shared CPU vary from run to run, so which findings `analyze` lists after the first
(host-bound, a late rank, the collectives that expose most) and the report's verdict may differ;
everything else must have README's shape. `TPSCOPE_REGENERATE_README=1` writes the blocks from
this run into README.md instead of comparing them.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
REGENERATE = os.environ.get("TPSCOPE_REGENERATE_README") == "1"

pytestmark = pytest.mark.timeout(300)


def _shape(text: str) -> str:
    text = re.sub(r"[-+]?\d[\d,.]*", "#", text)
    text = re.sub(r"[─-]{3,}", "─", text)
    return re.sub(r"\s+", " ", text).strip()


def _blocks(text: str) -> list[str]:
    """The fenced blocks without a language (README's outputs and the workflow), in order."""
    blocks, lang, body = [], None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                if not lang:
                    blocks.append("".join(body))
                lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def _workflow(text: str) -> list[str]:
    """The Quick start's CPU workflow: its `tpscope` command lines, comments left out."""
    block = next(b for b in _blocks(text) if b.startswith("tpscope run --device cpu"))
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def _block(text: str, start: str) -> str:
    return next(b for b in _blocks(text) if b.startswith(start))


def _findings(lines: list[str]) -> tuple[list[str], list[str]]:
    """(the findings, one string each, joined from their wrapped lines; the other lines)."""
    findings: list[str] = []
    rest: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("What matters"):
            inside = True
            rest.append(line)
        elif inside and not line.strip():
            inside = False
            rest.append(line)
        elif inside and re.match(r"\d+\. ", line):
            findings.append(line)
        elif inside:
            findings[-1] += " " + line.strip()
        else:
            rest.append(line)
    return findings, rest


def _title(finding: str) -> str:
    """A finding's name, its number and what it names as `#`: `Rank # arrives last`."""
    return _shape(finding.split(". ", 1)[1].split(":", 1)[0])


def _analyze_excerpt(out: str) -> str:
    """What README shows of `analyze`: from the first line through the critical-path table."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Critical path across ranks"))
    end = start
    while end < len(lines) and lines[end].strip() and not lines[end].startswith("host time"):
        end += 1
    return "\n".join(lines[:end]) + "\n"


def _report_excerpt(out: str) -> str:
    """What README shows of `report`: its verdict and its baseline and candidate lines."""
    lines = out.splitlines()
    verdict = next(ln for ln in lines if ln.startswith("**"))
    runs = [ln for ln in lines if ln.startswith(("- baseline:", "- candidate:"))]
    return "\n".join([verdict, "", *runs]) + "\n"


def _next_excerpt(out: str) -> str:
    lines = out.splitlines()
    return (
        "\n".join(lines[next(i for i, ln in enumerate(lines) if ln.startswith("next ")) :]) + "\n"
    )


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, str]:
    """Each workflow command's stdout, by its first two words (`analyze`, `report`)."""
    where = tmp_path_factory.mktemp("quickstart")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TPSCOPE_CACHE_DIR": str(where / "cache")}
    out = {}
    for command in _workflow(README.read_text()):
        argv = shlex.split(command)
        assert argv[0] == "tpscope", command
        if argv[1] == "dash":  # a server: the dashboard's own tests open it
            continue
        done = subprocess.run(
            [sys.executable, "-m", "tpscope.cli", *argv[1:]],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        # report: 0 pass, 1 a regression (chunking adds work over gloo); nothing else
        assert done.returncode in ((0, 1) if argv[1] == "report" else (0,)), (
            command,
            done.stderr[-2000:],
        )
        out[argv[1]] = done.stdout
    return out


def test_the_workflow_runs_every_command_readme_shows(outputs):
    assert {"run", "analyze", "report"} <= set(outputs)


def test_readme_s_blocks_have_the_shape_of_the_real_output(outputs):
    text = README.read_text()
    pairs = [
        (_block(text, "run: "), _analyze_excerpt(outputs["analyze"])),
        (_block(text, "**"), _report_excerpt(outputs["report"])),
        (_block(text, "next "), _next_excerpt(outputs["analyze"])),
    ]
    if REGENERATE:
        for shown, real in pairs:
            text = text.replace(f"```\n{shown}```", f"```\n{real}```", 1)
        README.write_text(text)
        pytest.skip("README.md regenerated from this run")
    (analyze_shown, analyze_real), (report_shown, report_real), (next_shown, next_real) = pairs

    # analyze: every line but the findings, in order; the findings by name
    shown_findings, shown_rest = _findings(analyze_shown.splitlines())
    real_findings, real_rest = _findings(analyze_real.splitlines())
    assert [_shape(ln) for ln in shown_rest] == [_shape(ln) for ln in real_rest]
    assert shown_findings and real_findings
    assert _title(shown_findings[0]) == "Exposed communication"  # a CPU run's largest cost
    assert "Exposed communication" in {_title(f) for f in real_findings[:2]}
    assert _title(shown_findings[-1]) == _title(real_findings[-1]) == "Headroom"
    # a finding shows its number, name, cost and a "Try:" where it suggests one
    real_titles = {_title(f) for f in real_findings}
    shown_titles = [_title(f) for f in shown_findings]
    assert sum(t in real_titles for t in shown_titles) * 2 >= len(shown_titles), (
        shown_titles,
        real_titles,
    )

    # report: the baseline and candidate lines; the verdict one the report prints
    assert [_shape(ln) for ln in report_shown.splitlines()[1:]] == [
        _shape(ln) for ln in report_real.splitlines()[1:]
    ]
    verdict = re.compile(r"\*\*(PASS|REGRESSION)\b.*\*\*$")
    assert verdict.match(report_shown.splitlines()[0]) and verdict.match(
        report_real.splitlines()[0]
    )

    # what to run next: the same table
    assert _shape(next_shown) == _shape(next_real)


def test_the_stated_number_of_tests_is_about_what_pytest_collects():
    """README's "about N tests" within 15% of what `pytest --collect-only -q` collects."""
    stated = re.search(r"about ([\d,]+) tests", README.read_text())
    assert stated, "README states how many tests there are"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    collected = int(re.search(r"(\d+) tests? collected", done.stdout).group(1))
    assert abs(int(stated.group(1).replace(",", "")) - collected) <= 0.15 * collected, collected
