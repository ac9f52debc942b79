"""The run folder's names: which files are a rank's trace, and what --overwrite may remove."""

from __future__ import annotations

from fnmatch import fnmatch

import pytest

from tpscope.runfolder.layout import MANIFEST_NAME, RUN_ARTIFACTS, is_trace_name


@pytest.mark.parametrize(
    "name, trace",
    [
        ("rank0.1796026699291652538.pt.trace.json.gz", True),
        ("worker0_step_12.1694128201545.pt.trace.json.gz", True),
        ("eager_trace.json.gz", True),
        ("train.json", True),
        ("tpscope_run.jsonc", False),
        ("tpscope_run.json", False),  # the manifest's older name
        ("notes.txt", False),
        ("trace.json.gz.tmp", False),
    ],
)
def test_trace_files_are_the_json_files_but_the_manifest(name, trace):
    assert is_trace_name(name) is trace


def test_overwrite_removes_the_runs_traces_and_manifest_only():
    def removed(name: str) -> bool:
        return any(fnmatch(name, pattern) for pattern in RUN_ARTIFACTS)

    assert (
        removed("rank1.17961.pt.trace.json.gz")
        and removed("rank0.1.pt.trace.json")
        and removed(MANIFEST_NAME)
    )
    assert (
        not removed("notes.md") and not removed("sweep.json") and not removed("eager_trace.json.gz")
    )
