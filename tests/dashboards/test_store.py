"""The store keeps a bounded number of versions of a folder it serves."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tpscope.dashboards.store import MAX_VERSIONS_PER_RUN, RunStore

DATA = Path(__file__).resolve().parents[1] / "data" / "h200-nvlink-unfused"


def test_a_folder_rewritten_while_served_keeps_a_bounded_number_of_versions(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    other = tmp_path / "other"
    shutil.copytree(DATA, other)
    store = RunStore([run, other], None)
    rid, oid = store.run_ids
    store.load(oid)
    trace = next(run.glob("rank0*"))
    loaded = []
    for _ in range(5):
        st = trace.stat()
        os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a new version
        loaded.append(store.load(rid))
        store.activity_detail(rid)
        store.compared(rid, oid)
    versions = {k[2] for k in store._memos if k[1] == rid}
    assert len(versions) <= MAX_VERSIONS_PER_RUN, len(versions)
    assert loaded[-1].version in versions
    assert store.load(rid) is loaded[-1]  # the newest is served from memory
    assert ("run", oid, store.load(oid).version) in store._memos  # the other folder kept


def test_reading_ahead_reads_every_run_the_first_shown_first(tmp_path):
    runs = []
    for name in ("a-run", "b-run", "c-run"):
        shutil.copytree(DATA, tmp_path / name)
        runs.append(tmp_path / name)
    store = RunStore(runs, None)
    order = []
    load = store.load
    store.load = lambda run_id: (order.append(run_id), load(run_id))[1]
    assert all(store.ready(r) is None for r in store.run_ids)  # nothing read before asked
    store.read_all_in_background("b-run")
    store.read_all_in_background("c-run")  # once per process: a second call starts nothing
    store._reader.join(timeout=120)
    assert order == ["b-run", "a-run", "c-run"]
    assert all(store.ready(r) is not None for r in store.run_ids)
