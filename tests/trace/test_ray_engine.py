"""`--engine ray`: the per-rank map as tasks on a local Ray cluster (2 CPUs) gives the very same
analysis as the local process pool, field for field, on 64 ranks of a real H200 run."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import ray

from tpscope.cli import main
from tpscope.metrics import analyze_run, as_json
from tpscope.trace import load_run

SOURCE = Path(__file__).resolve().parents[1] / "data" / "h200-shm-chunked4"
RANKS = 64


def write_64_ranks(folder: Path) -> Path:
    """64 rank files from the two real ranks: rank k is source rank k % 2 under rank id k, with a
    host clock offset per 8 ranks (baseTimeNanoseconds moved by up to 7 x 1.3 µs)."""
    folder.mkdir()
    docs = [json.load(gzip.open(p)) for p in sorted(SOURCE.glob("*.json.gz"))]
    for k in range(RANKS):
        doc = dict(docs[k % 2])
        doc["distributedInfo"] = {**doc["distributedInfo"], "rank": k, "world_size": RANKS}
        doc["baseTimeNanoseconds"] = int(doc.get("baseTimeNanoseconds") or 0) + (k // 8) * 1300
        (folder / f"rank{k}.pt.trace.json.gz").write_bytes(
            gzip.compress(json.dumps(doc).encode(), 1)
        )
    return folder


@pytest.fixture(scope="module")
def run64(tmp_path_factory) -> Path:
    return write_64_ranks(tmp_path_factory.mktemp("ray") / "run64")


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module (map_ray uses a cluster this process already has)."""
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


def assert_same_tables(a, b) -> None:
    assert a.rank == b.rank and a.symbols == b.symbols and a.warnings == b.warnings
    for table in ("gpu", "annotations", "waits", "cpu_ops", "runtime"):
        x, y = getattr(a, table), getattr(b, table)
        for f in x.__dataclass_fields__:
            np.testing.assert_array_equal(
                getattr(x, f), getattr(y, f), err_msg=f"rank {a.rank} {table}.{f}"
            )
    np.testing.assert_array_equal(a.steps.start_ns, b.steps.start_ns)
    np.testing.assert_array_equal(a.lanes, b.lanes)


def test_ray_map_equals_the_local_pool_field_for_field(run64, cluster):
    local = load_run(run64, workers=2)
    seen: list[tuple[int, int]] = []
    remote = load_run(run64, engine="ray", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, RANKS) for k in range(1, RANKS + 1)]  # progress as each rank finishes
    assert remote.rank_ids == local.rank_ids == list(range(RANKS))
    assert remote.warnings == local.warnings
    for a, b in zip(local.ranks, remote.ranks):
        assert_same_tables(a, b)
    assert as_json(analyze_run(remote)) == as_json(analyze_run(local))
    # the clock offsets are there to be seen: rank 8's host runs 1.3 µs after rank 0's
    assert local.ranks[8].gpu.start_ns[0] - local.ranks[0].gpu.start_ns[0] == 1300


def test_cli_engine_ray_prints_the_same_json(run64, cluster, capsys):
    assert main(["analyze", str(run64), "--json", "--no-cache"]) == 0
    pool = capsys.readouterr().out
    assert main(["analyze", str(run64), "--json", "--no-cache", "--engine", "ray"]) == 0
    captured = capsys.readouterr()
    assert captured.out == pool
    assert f"tpscope: {RANKS}/{RANKS} ranks read" in captured.err


def test_address_without_the_ray_engine_is_one_line(run64, capsys):
    assert main(["analyze", str(run64), "--address", "auto"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tpscope analyze: error: --address names a Ray cluster: add --engine ray"]


def test_ray_missing_is_one_line(run64, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(["analyze", str(run64), "--no-cache", "--engine", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "tpscope analyze: error: --engine ray: Ray is not installed (pip install 'tpscope[ray]')"
    ]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_where_no_cluster_answers_is_one_line_soon(run64, capsys, scheme):
    """Ray alone retries such an address for minutes; nothing listens on port 1 of this host."""
    import time

    address = f"{scheme}127.0.0.1:1"
    started = time.monotonic()
    assert main(["analyze", str(run64), "--no-cache", "--engine", "ray", "--address", address]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"tpscope analyze: error: --address {address}: no Ray cluster answers at 127.0.0.1:1"
    ), err
    assert time.monotonic() - started < 30
