"""Run folders: discovery, ranks from distributedInfo, refusals with one clear line."""

import gzip
import json
import shutil
from pathlib import Path

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
    assert any("no trace for 1 rank(s): 0" in w for w in run.warnings)


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
    assert run.manifest.tokens_per_s == 1234.5


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "no such file or folder"),
        (lambda p: p.mkdir(), "no trace files"),
        (lambda p: (p.mkdir(), (p / "a.txt").write_text("x")), "no trace files"),
        (lambda p: (p.mkdir(), (p / "a.json").write_text("{not json")), "not valid JSON"),
        (
            lambda p: (
                p.mkdir(),
                (p / "a.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}' * 50)[:40]),
            ),
            "broken gzip data",
        ),
        (
            lambda p: (p.mkdir(), (p / "a.json").write_text(json.dumps({"traceEvents": []}))),
            "no trace events",
        ),
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


# ---- combining ranks: files of different runs, ranks beyond the world size, wrapped durations ----

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _rank_file(run: Path, rank: int) -> Path:
    for p in run.iterdir():
        if (
            p.name.endswith(".json.gz")
            and json.loads(gzip.decompress(p.read_bytes()))["distributedInfo"]["rank"] == rank
        ):
            return p
    raise AssertionError(rank)


def test_files_of_two_runs_in_one_folder_are_refused_in_one_line(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    a, b = _rank_file(SAMPLES / "h200x2-nvlink-none", 0), _rank_file(SAMPLES / "h200x2-shm-none", 1)
    shutil.copy(a, folder / a.name)
    shutil.copy(b, folder / b.name)
    with pytest.raises(UserError) as exc:
        load_run(folder)
    message = str(exc.value)
    assert "\n" not in message and "rank files of different runs" in message and b.name in message


def test_rank_beyond_the_world_size_is_a_warning(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for rank, as_rank in ((0, 0), (1, 5)):
        doc = json.loads(
            gzip.decompress(_rank_file(SAMPLES / "h200x2-nvlink-none", rank).read_bytes())
        )
        doc["distributedInfo"]["rank"] = as_rank
        (folder / f"r{as_rank}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    run = load_run(folder)
    assert any("rank(s) [5] beyond the world size 2" in w for w in run.warnings), run.warnings
    assert any("no trace for 1 rank(s): 1" in w for w in run.warnings), run.warnings


def test_a_wrapped_around_duration_is_dropped_with_a_warning(tmp_path):
    r0, r1 = two_ranks()
    r0.kernel("gemm", 500, 9e12)  # 9·10^12 µs: an unsigned duration that wrapped around
    run = load_run(write_run(tmp_path / "run", [r0, r1]))
    assert any("lasting longer than the whole trace" in w for w in run.warnings), run.warnings
    span = run.ranks[0].gpu.end_ns.max() - run.ranks[0].gpu.start_ns.min()
    assert span < 10**9


def _cycle(rank: int, step: int, start_us: float) -> RankTrace:
    r = RankTrace(rank)
    r.cpu_annotation(f"ProfilerStep#{step}", start_us, 400)
    r.kernel("gemm", start_us + 10, 100, launch_us=(start_us + 5, 2))
    r.kernel("gemm", start_us + 150, 100, launch_us=(start_us + 140, 2))
    return r


def test_profiling_cycles_of_one_rank_become_consecutive_steps(tmp_path):
    """schedule(repeat=2) writes two files per rank (one per cycle), both with that rank: read as
    one trace per rank whose steps are the two cycles' steps."""
    for rank in (0, 1):
        _cycle(rank, 2, 0).write(tmp_path / f"rank{rank}.100.pt.trace.json.gz")
        _cycle(rank, 6, 5000).write(tmp_path / f"rank{rank}.200.pt.trace.json.gz")
    run = load_run(tmp_path, workers=1)
    assert run.rank_ids == [0, 1]
    for r in run.ranks:
        assert r.steps.step.tolist() == [2, 6]
        assert len(r.gpu) == 4 and r.gpu.step.tolist() == [2, 2, 6, 6]
        assert (r.steps.end_ns - r.steps.start_ns).tolist() == [240_000, 240_000]


def test_a_folder_of_runs_is_found_and_named_when_one_run_is_expected(tmp_path):
    from tpscope.trace import find_runs

    for name in ("b-run", "a-run"):
        write_run(tmp_path / "logs" / name, two_ranks())
    (tmp_path / "logs" / "empty").mkdir()
    assert [p.name for p in find_runs(tmp_path / "logs")] == ["a-run", "b-run"]
    assert find_runs(tmp_path / "logs" / "a-run") == [tmp_path / "logs" / "a-run"]
    assert find_runs(tmp_path / "logs" / "empty") == []
    with pytest.raises(UserError, match=r"a folder of 2 runs \(a-run, b-run\)"):
        load_run(tmp_path / "logs")


def test_a_folder_of_a_run_stopped_before_its_traces_says_so(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "tpscope_run.jsonc").write_text(
        json.dumps({"complete": False, "stopped": "stopped by SIGTERM"})
    )
    with pytest.raises(UserError) as exc:
        load_run(run)
    assert str(exc.value) == (
        f"{run}: no trace files (*.json or *.json.gz from torch.profiler) in this folder; "
        "its manifest says the run did not finish (stopped by SIGTERM)"
    )


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
    assert [str(r.path) for r in from_url.ranks] == [
        f"memory:///tpscope-test-run/{r.path.name}" for r in on_disk.ranks
    ]
    for a, b in zip(from_url.ranks, on_disk.ranks):
        assert a.rank == b.rank
        np.testing.assert_array_equal(a.gpu.start_ns, b.gpu.start_ns)
        np.testing.assert_array_equal(a.gpu.end_ns, b.gpu.end_ns)


def test_an_fsspec_url_with_no_traces_is_one_line():
    with pytest.raises(UserError, match="memory://tpscope-nothing-here: no such file or folder"):
        load_run("memory://tpscope-nothing-here")


def test_a_url_reads_the_manifest_beside_the_traces(tmp_path):
    """`file:///RUN` and `memory://RUN` read `tpscope_run.json` as the folder does: its fields
    (tokens per step) and its warnings (a run that did not finish); a broken one is one line."""
    import fsspec

    folder = tmp_path / "run"
    write_run(folder, two_ranks())
    (folder / "tpscope_run.json").write_text(
        json.dumps({"tokens_per_step": 4096, "complete": False, "stopped": "stopped by SIGTERM"})
    )
    on_disk = load_run(folder)
    assert on_disk.manifest.tokens_per_step == 4096
    from_file_url = load_run(f"file://{folder}")
    assert from_file_url.manifest == on_disk.manifest
    assert [w for w in from_file_url.warnings if "did not finish" in w]
    fs = fsspec.filesystem("memory")
    for f in sorted(folder.iterdir()):
        fs.pipe(f"/tpscope-test-manifest/{f.name}", f.read_bytes())
    try:
        assert load_run("memory://tpscope-test-manifest").manifest.tokens_per_step == 4096
        one_file = load_run(
            f"memory://tpscope-test-manifest/{sorted(folder.glob('*.json*'))[0].name}"
        )
        assert one_file.manifest.tokens_per_step == 4096
        fs.pipe("/tpscope-test-manifest/tpscope_run.json", b'{"tokens_per_step": true}')
        with pytest.raises(UserError, match="tpscope_run.json: field tokens_per_step"):
            load_run("memory://tpscope-test-manifest")
    finally:
        fs.rm("/tpscope-test-manifest", recursive=True)


def test_missing_ranks_are_named_as_runs():
    from tpscope.trace.run_folder import rank_ranges

    assert rank_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert rank_ranges(list(range(1, 300))) == "1-299" and rank_ranges([4]) == "4"
