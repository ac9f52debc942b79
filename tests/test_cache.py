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
    # the terminal report once: it replays the run for its what-if headroom, cached beside it
    assert main(["analyze", str(run)]) == 0
    capsys.readouterr()
    assert len(list((tmp_path / "cache").glob("headroom-analysis-*.pkl"))) == 1
    import tpscope.trace

    def refuse(*args, **kwargs):
        raise AssertionError("the traces were read again")

    monkeypatch.setattr(tpscope.trace, "load_run", refuse)
    assert main(["analyze", str(run), "--json"]) == 0
    assert capsys.readouterr().out == first
    # --json writes its cached text again, without encoding the analysis; the terminal report
    # reads the cached analysis
    assert len(list((tmp_path / "cache").glob("json-analysis-*.pkl"))) == 1
    import tpscope.jsonable

    monkeypatch.setattr(tpscope.jsonable, "dumps", refuse)
    assert main(["analyze", str(run), "--json"]) == 0
    assert capsys.readouterr().out == first
    assert main(["analyze", str(run)]) == 0
    assert "Per rank and step" in capsys.readouterr().out
    # the same command without the cache does read them (the refusal is an internal error, exit 3)
    assert main(["analyze", str(run), "--json", "--no-cache"]) == 3
    details = capsys.readouterr().err.strip().rsplit("details in ", 1)[1]
    assert "AssertionError: the traces were read again" in Path(details).read_text()


def test_a_trace_file_analyzed_alone_sees_a_later_change_of_its_folders_manifest(
    tmp_path, capsys, monkeypatch
):
    import json
    import os

    from tpscope.cli import main

    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200-nvlink-unfused", run)
    trace = sorted(run.glob("rank0.*"))[0]

    def tokens_per_s() -> float | None:
        assert main(["analyze", str(trace), "--json"]) == 0
        return json.loads(capsys.readouterr().out)["summary"]["tokens_per_s"]

    assert tokens_per_s() is None  # no manifest yet
    manifest = run / "tpscope_run.jsonc"
    manifest.write_text(json.dumps({"tokens_per_s": 1000.0}))
    assert tokens_per_s() == 1000.0
    manifest.write_text(json.dumps({"tokens_per_s": 2000.0}))
    st = manifest.stat()
    # a later write, as a clock sees it
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert tokens_per_s() == 2000.0
    assert len(list((tmp_path / "cache").glob("analysis-*.pkl"))) == 3  # three keys, three analyses


def test_the_code_fingerprint_follows_the_shared_modules_the_results_use():
    """Cached results hold warnings whose numbers tpscope.numbers prints, GEMM shapes by
    tpscope.gemm_shapes' rules, the JSON text tpscope.jsonable writes, and columns the C reader
    read: a change to any is a new fingerprint."""
    import tpscope
    from tpscope.cache import code_fingerprint

    root = Path(tpscope.__file__).parent
    for name in ("numbers.py", "gemm_shapes.py", "jsonable.py", "trace/_event_columns.c"):
        before = code_fingerprint()
        st = (root / name).stat()
        os.utime(root / name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        try:
            assert code_fingerprint() != before, name
        finally:
            os.utime(root / name, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_folder_with_one_changed_rank_decodes_only_that_rank(tmp_path, capsys, monkeypatch):
    import gzip
    import json

    from tpscope.cli import main
    from tpscope.trace import run_folder

    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200-shm-chunked4", run)
    decoded = []
    read_raw = run_folder._read_raw
    monkeypatch.setattr(
        run_folder,
        "_read_raw",
        lambda path, *a, **k: decoded.append(path.name) or read_raw(path, *a, **k),
    )
    assert main(["analyze", str(run), "--json", "--workers", "1"]) == 0
    first = capsys.readouterr().out
    assert len(decoded) == 2
    assert len(list((tmp_path / "cache" / "ranks").glob("rank-*.pkl"))) == 2

    changed = next(run.glob("rank1*"))  # rank 1's middle kernel made 100 µs longer
    doc = json.loads(gzip.decompress(changed.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[len(kernels) // 2]["dur"] += 100.0
    changed.write_bytes(gzip.compress(json.dumps(doc).encode()))
    decoded.clear()
    assert main(["analyze", str(run), "--json", "--workers", "1"]) == 0
    second = capsys.readouterr().out
    assert decoded == [changed.name]  # rank 0's map result came from the cache
    assert second != first
    decoded.clear()
    assert main(["analyze", str(run), "--json", "--workers", "1", "--no-cache"]) == 0
    assert capsys.readouterr().out == second  # what the cache served equals a fresh read
    assert len(decoded) == 2


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.rglob("*.pkl"))


def test_an_entry_of_another_type_is_recomputed(tmp_path, capsys, monkeypatch):
    """A pickle that reads but holds something else (another version's, or any other object):
    recomputed and overwritten, never handed to the analyzer."""
    import json
    import pickle

    from tpscope.cli import main

    monkeypatch.setenv("TPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200-nvlink-unfused", run)
    assert main(["analyze", str(run), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    from tpscope.cache import CACHE_FORMAT, CACHE_MARK

    odd = (["not", "an", "analysis"], None, 7)
    for value in [*odd, *((CACHE_MARK, CACHE_FORMAT, v) for v in odd)]:
        for f in _entries(tmp_path / "cache"):
            f.write_bytes(pickle.dumps(value))
        for argv in (["analyze", str(run), "--json"], ["analyze", str(run)]):
            assert main(argv) == 0, value
            out = capsys.readouterr().out
            if "--json" in argv:
                assert json.loads(out) == first
    cache = DiskCache(tmp_path / "c2")
    assert cache.get_or_compute("k", run, lambda: 1, expect=int) == 1
    for f in _entries(tmp_path / "c2"):
        f.write_bytes(pickle.dumps((CACHE_MARK, CACHE_FORMAT, "one")))
    assert cache.get_or_compute("k", run, lambda: 2, expect=int) == 2
    assert cache.get_or_compute("k", run, lambda: 3, expect=int) == 2  # the new one was stored


def test_pruning_tolerates_dangling_links_and_a_racing_pruner(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from tpscope.cache import MAX_RANK_ENTRIES, RANKS_FOLDER

    ranks = tmp_path / "cache" / RANKS_FOLDER
    ranks.mkdir(parents=True)
    for i in range(MAX_RANK_ENTRIES + 200):
        (ranks / f"rank-{i:05}.pkl").write_bytes(b"x")
    (ranks / "rank-dangling.pkl").symlink_to(tmp_path / "gone")
    (tmp_path / "cache" / "analysis-dangling.pkl").symlink_to(tmp_path / "gone")
    with ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(DiskCache._prune, ranks, MAX_RANK_ENTRIES) for _ in range(4)]:
            f.result()  # no error from a file another pruner removed first
    assert len(list(ranks.glob("*.pkl"))) <= MAX_RANK_ENTRIES
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.json").write_text("{}")
    assert DiskCache(tmp_path / "cache").get_or_compute("k", run, lambda: 1) == 1
