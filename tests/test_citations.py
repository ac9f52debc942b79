"""Comments, help texts, docstrings and docs say what is: none cites a file outside the
repository, an issue number, a round of work or the history of a change (a reader can open
none of them). Every tracked text file is read, but the recorded data."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (what a match cites, the pattern); case matters where a word could be a common one
RULES: tuple[tuple[str, str], ...] = (
    (
        "a file outside the repository",
        r"\b(?:DESIGN|BENCHMARKS|KINDS|METRICS|STYLE)\.md\b|\bdesign_md\b|\.\./shared\b|/work/",
    ),
    ("an issue number", r"\b(?:[Ii]ssues?|PR|[Pp]ull request)\s*#?\d+\b"),
    (
        "a round of work",
        r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|\d+(?:st|nd|rd|th)|earlier|previous)"
        r" rounds?\b|\b[Rr]ounds? \d+\b",
    ),
    (
        "the history of a change",
        r"\b(?:[Pp]reviously|[Ff]ormerly|used to be|(?:it|they|this|that|which) used to|before this change"
        r"|until now)\b",
    ),
)
# Recorded as they were: traces, measurements, and the decisions page (the history of each
# lever, kept apart from what a user reads); and other projects' code vendored unchanged.
RECORDS = (
    "sample_traces/",
    "tests/data/",
    "benchmarks/results/",
    "docs/decisions.md",
    "third_party/",
)
THIS_FILE = "tests/test_citations.py"


def tracked_text_files() -> list[tuple[str, str]]:
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    out = []
    for name in names.decode().split("\0"):
        if not name or name == THIS_FILE or name.startswith(RECORDS):
            continue
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        try:
            out.append((name, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue  # not text (a gzip member, an image)
    return out


def citations(text: str) -> list[tuple[int, str, str]]:
    """(line number, what it cites, the line) for every line that matches a rule."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in RULES:
            if re.search(pattern, line):
                found.append((number, what, line.strip()))
    return found


def test_the_rules_catch_what_they_name():
    text = "\n".join(
        [
            "# see DESIGN.md for why",
            "help='(KINDS.md)'",
            "corpus in ../shared/corpus",
            "fixes issue 17",
            "as in issue #22",
            "measured in the third round",
            "earlier rounds timed it",
            "round 5 showed",
            "it used to become 1",
            "previously a dict",
            "metrics.md §4 says",
            "the ring's round robin",
            "one round of the ring",
            "is used to compute",
            "ProfilerStep#3",
        ]
    )
    assert [n for n, _, _ in citations(text)] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


def test_no_tracked_file_cites_what_a_reader_cannot_open():
    files = tracked_text_files()
    assert any(name == "README.md" for name, _ in files) and len(files) > 100
    bad = [
        f"{name}:{n}: {what}: {line[:120]}"
        for name, text in files
        for n, what, line in citations(text)
    ]
    assert not bad, "\n".join(bad)
