"""The analysis cache: a folder analyzed before is read back; a changed file is noticed."""

import os
import shutil
from pathlib import Path

from tpscope.cache import DiskCache

DATA = Path(__file__).resolve().parent / "data"


def test_hit_after_miss_and_a_changed_file_is_noticed(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200-nvlink-unfused", run)
    cache = DiskCache(tmp_path / "cache")
    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    assert cache.get_or_compute("analysis", run, compute) == {"n": 1}
    assert cache.get_or_compute("analysis", run, compute) == {"n": 1}  # from disk
    assert (cache.hits, cache.misses) == (1, 1)
    f = next(run.glob("rank0*"))
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched: same bytes, new mtime
    assert cache.get_or_compute("analysis", run, compute) == {"n": 2}
    (run / "rank2.json").write_text("{}")  # a new file in the folder
    assert cache.get_or_compute("analysis", run, compute) == {"n": 3}


def test_a_corrupt_entry_is_recomputed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.json").write_text("{}")
    cache = DiskCache(tmp_path / "cache")
    cache.get_or_compute("k", run, lambda: 1)
    for f in (tmp_path / "cache").glob("*.pkl"):
        f.write_bytes(b"garbage")
    assert cache.get_or_compute("k", run, lambda: 2) == 2


def test_analyze_twice_reads_the_cache(tmp_path, capsys, monkeypatch):
    from tpscope.cli import main

    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200-nvlink-unfused", run)
    assert main(["analyze", str(run), "--json"]) == 0
    first = capsys.readouterr().out
    assert len(list((tmp_path / "cache").glob("analysis-*.pkl"))) == 1
    import tpscope.trace

    def refuse(*args, **kwargs):
        raise AssertionError("the traces were read again")

    monkeypatch.setattr(tpscope.trace, "load_run", refuse)
    assert main(["analyze", str(run), "--json"]) == 0
    assert capsys.readouterr().out == first
    try:  # the same command without the cache does read them
        main(["analyze", str(run), "--json", "--no-cache"])
    except AssertionError as exc:
        assert "read again" in str(exc)
    else:
        raise AssertionError("--no-cache did not read the traces")
