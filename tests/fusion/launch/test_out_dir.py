"""The run folder a run holds: refused when it holds an earlier run (unless --overwrite, which
removes only that run's files), held by one run at a time, and default names that never collide."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tpscope.errors import UserError
from tpscope.fusion.launch.out_dir import LOCK_NAME, claim_out_dir, prepare_out_dir, unique_out_dir


def test_out_folder_is_refused_unless_overwrite(tmp_path):
    run = tmp_path / "run"
    prepare_out_dir(str(run), overwrite=False)  # absent: created
    assert run.is_dir()
    prepare_out_dir(str(run), overwrite=False)  # empty: fine
    (run / "rank0.1.pt.trace.json.gz").write_bytes(b"x")
    (run / "tpscope_run.jsonc").write_text("{}")
    (run / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty .*--overwrite"):
        prepare_out_dir(str(run), overwrite=False)
    prepare_out_dir(str(run), overwrite=True)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]  # only the old run's files go
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        prepare_out_dir(str(tmp_path / "file"), overwrite=True)


def test_a_folder_held_by_a_run_is_refused_and_freed_when_released(tmp_path):

    first = claim_out_dir(str(tmp_path / "run"), overwrite=False)
    with pytest.raises(
        UserError, match=rf"--out .*run: another tpscope run \(pid {os.getpid()}\) is writing"
    ):
        # --overwrite does not take a held folder
        claim_out_dir(str(tmp_path / "run"), overwrite=True)
    first.release()
    assert not (tmp_path / "run" / LOCK_NAME).exists()
    claim_out_dir(str(tmp_path / "run"), overwrite=False).release()  # free again (and still empty)


def test_default_names_taken_in_the_same_second_never_collide(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        names = list(
            pool.map(
                lambda _: unique_out_dir(str(tmp_path / "runs"), "20260101-120000-chunked"),
                range(8),
            )
        )
    assert len(set(names)) == 8 and all(Path(n).is_dir() for n in names)
    assert sorted(Path(n).name for n in names)[:2] == [
        "20260101-120000-chunked",
        "20260101-120000-chunked-2",
    ]


def test_another_node_never_writes_into_a_finished_run(tmp_path):
    """A launcher of node rank > 0 holds no lock; it must still refuse a folder that holds an
    earlier run no launcher is writing (node 0 would refuse it too), and join one node 0 holds."""
    from tpscope.fusion.launch.out_dir import join_out_dir

    out = tmp_path / "run"
    out.mkdir()
    (out / "tpscope_run.json").write_text('{"complete": true}')
    with pytest.raises(UserError, match="folder exists and is not empty"):
        join_out_dir(str(out), overwrite=False)
    assert (out / "tpscope_run.json").read_text() == '{"complete": true}'
    (out / "tpscope_run.json").unlink()
    claim = claim_out_dir(str(out), overwrite=False)  # node 0 is writing: the other nodes join
    (out / "rank0_trace.json").write_text("{}")
    try:
        assert join_out_dir(str(out), overwrite=False) == out
    finally:
        claim.release()
    assert join_out_dir(str(tmp_path / "new"), overwrite=False).is_dir()
