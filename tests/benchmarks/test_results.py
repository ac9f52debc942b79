"""benchmarks/results/: one folder per result, each with a README that states the commands, the
versions and the date; the pages that cite them link to folders that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "benchmarks" / "results"
FOLDERS = sorted(
    p
    for p in [*RESULTS.iterdir(), *(RESULTS / "evidence").iterdir()]
    if p.is_dir() and p.name != "evidence"
)


def test_every_result_folder_has_a_readme_with_commands_versions_and_date():
    assert len(FOLDERS) >= 30
    for folder in FOLDERS:
        assert re.search(r"-\d{4}-\d\d-\d\d$", folder.name), folder.name
        text = (folder / "README.md").read_text()
        assert "## Commands" in text or "**Command:**" in text, folder.name
        assert "**Date:** 20" in text, folder.name
        assert "versions" in text.lower() and "torch 2." in text, folder.name


def test_the_index_lists_every_folder():
    index = (RESULTS / "README.md").read_text()
    for folder in FOLDERS:
        assert f"]({folder.relative_to(RESULTS)}/)" in index, folder.name


def test_relative_links_resolve():
    pages = [
        ROOT / "docs" / "benchmarks.md",
        ROOT / "docs" / "decisions.md",
        RESULTS / "README.md",
        *(f / "README.md" for f in FOLDERS),
    ]
    for page in pages:
        text = page.read_text()
        targets = re.findall(r"\]\(([^)#\s]+)[^)]*\)", text) + re.findall(
            r"^\[[^\]]+\]: (\S+)$", text, re.M
        )
        for t in targets:
            if "://" in t:
                continue
            assert (page.parent / t).exists(), (page.relative_to(ROOT), t)
