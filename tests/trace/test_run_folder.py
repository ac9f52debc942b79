"""Run folders: discovery, ranks from distributedInfo, refusals with one clear line."""

import gzip
import json
import shutil

import pytest

from tests.kineto import RankTrace, write_run
from tpscope.errors import UserError
from tpscope.trace import load_run


def two_ranks() -> list[RankTrace]:
    out = []
    for rank in (0, 1):
        r = RankTrace(rank)
        r.kernel("gemm", 0, 10)
        out.append(r)
    return out


def test_rank_comes_from_distributed_info_not_the_file_name(tmp_path):
    r0, r1 = two_ranks()
    r1.write(tmp_path / "rank0.x.pt.trace.json.gz")  # misleading names
    r0.write(tmp_path / "rank1.y.pt.trace.json.gz")
    run = load_run(tmp_path)
    assert run.rank_ids == [0, 1]
    assert run.ranks[0].path.name == "rank1.y.pt.trace.json.gz"


def test_plain_and_gzipped_files_and_any_names(tmp_path):
    r0, r1 = two_ranks()
    r0.write(tmp_path / "worker_a.json", gz=False)
    r1.write(tmp_path / "whatever.json.gz")
    (tmp_path / "notes.txt").write_text("not a trace")
    assert load_run(tmp_path).rank_ids == [0, 1]


def test_two_files_with_one_rank_is_an_error_naming_both(tmp_path):
    r0, _ = two_ranks()
    r0.write(tmp_path / "a.json.gz")
    r0.write(tmp_path / "b.json.gz")
    with pytest.raises(UserError, match=r"a\.json\.gz and .*b\.json\.gz both claim rank 0"):
        load_run(tmp_path)


def test_missing_rank_gives_a_warning(tmp_path):
    r = RankTrace(1, world_size=2)
    r.kernel("gemm", 0, 10)
    write_run(tmp_path / "run", [r])
    run = load_run(tmp_path / "run")
    assert any("no trace for rank(s) [0]" in w for w in run.warnings)


def test_trace_without_rank_takes_its_place_in_the_folder(tmp_path):
    a, b = RankTrace(None), RankTrace(None)
    a.kernel("gemm", 0, 1)
    b.kernel("gemm", 0, 1)
    a.write(tmp_path / "a.json.gz")
    b.write(tmp_path / "b.json.gz")
    run = load_run(tmp_path)
    assert run.rank_ids == [0, 1]
    assert sum("no distributedInfo.rank" in w for w in run.warnings) == 2


def test_manifest_is_read(tmp_path):
    write_run(tmp_path / "run", two_ranks(), manifest={"tokens_per_s": 1234.5})
    run = load_run(tmp_path / "run")
    assert run.manifest["tokens_per_s"] == 1234.5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "no such file or folder"),
        (lambda p: p.mkdir(), "no trace files"),
        (lambda p: (p.mkdir(), (p / "a.txt").write_text("x")), "no trace files"),
        (lambda p: (p.mkdir(), (p / "a.json").write_text("{not json")), "not valid JSON"),
        (lambda p: (p.mkdir(), (p / "a.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}' * 50)[:40])),
         "broken gzip data"),
        (lambda p: (p.mkdir(), (p / "a.json").write_text(json.dumps({"traceEvents": []}))), "no trace events"),
        (lambda p: (p.mkdir(), (p / "a.json").write_text("")), "empty file"),
    ],
)
def test_refusals_name_the_file_and_the_problem(tmp_path, make, message):
    target = tmp_path / "run"
    make(target)
    with pytest.raises(UserError, match=message) as info:
        load_run(target)
    assert "\n" not in str(info.value)
    assert str(target) in str(info.value)


def test_one_broken_rank_among_good_ones_is_skipped_with_a_warning(tmp_path):
    write_run(tmp_path / "run", two_ranks())
    (tmp_path / "run" / "rank2.json.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    run = load_run(tmp_path / "run")
    assert run.rank_ids == [0, 1]
    assert any("broken gzip" in w for w in run.warnings)


def test_single_file_path(tmp_path):
    shutil.copytree("tests/data/h200-nvlink-unfused", tmp_path / "run")
    (one,) = sorted((tmp_path / "run").glob("rank0*"))
    assert load_run(one).rank_ids == [0]


def test_an_fsspec_url_reads_like_the_folder(tmp_path):
    """Rank files in object storage (a memory:// URL here): the same ranks and tables as the
    folder on disk, the URL kept as the run's and each rank's path."""
    import fsspec
    import numpy as np

    folder = tmp_path / "run"
    write_run(folder, two_ranks())
    fs = fsspec.filesystem("memory")
    for f in sorted(folder.iterdir()):
        fs.pipe(f"/tpscope-test-run/{f.name}", f.read_bytes())
    try:
        from_url = load_run("memory://tpscope-test-run")
    finally:
        fs.rm("/tpscope-test-run", recursive=True)
    on_disk = load_run(folder)
    assert from_url.path == "memory://tpscope-test-run"
    assert [str(r.path) for r in from_url.ranks] == [f"memory:///tpscope-test-run/{r.path.name}" for r in on_disk.ranks]
    for a, b in zip(from_url.ranks, on_disk.ranks):
        assert a.rank == b.rank
        np.testing.assert_array_equal(a.gpu.start_ns, b.gpu.start_ns)
        np.testing.assert_array_equal(a.gpu.end_ns, b.gpu.end_ns)


def test_an_fsspec_url_with_no_traces_is_one_line():
    with pytest.raises(UserError, match="memory://tpscope-nothing-here: no such file or folder"):
        load_run("memory://tpscope-nothing-here")
