"""A run's ranks held packed (trace/ranks.py): the same tables on every read, never many unpacked at
once, and a header that agrees with the tables."""

from __future__ import annotations

import gc
import pickle
import weakref
from pathlib import Path

import numpy as np
import pytest

from tpscope.trace import load_run, ranks, tables
from tpscope.trace.compact import PackedRank, RankHeader, pack
from tpscope.trace.ranks import RankList

ROOT = Path(__file__).resolve().parents[2]
DLRM = ROOT / "tests" / "data" / "real" / "param-dlrm-torchrec-v100x8"


@pytest.fixture(scope="module")
def eight():
    return list(load_run(DLRM).ranks)


def same_header(a: RankHeader, b: RankHeader) -> None:
    assert (a.rank, a.path, a.world_size, a.hostname, a.cpu_run, a.gpu_rows, a.gpu_span_ns) == (
        b.rank,
        b.path,
        b.world_size,
        b.hostname,
        b.cpu_run,
        b.gpu_rows,
        b.gpu_span_ns,
    )
    assert np.array_equal(a.steps.step, b.steps.step) and a.warnings == b.warnings


def same_rank(a, b) -> None:
    for name in ("gpu", "annotations", "waits", "steps", "cpu_ops", "runtime"):
        x, y = getattr(a, name), getattr(b, name)
        for f in type(x).__dataclass_fields__:
            u, v = getattr(x, f), getattr(y, f)
            assert np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v, (name, f)
    assert (a.rank, a.symbols, a.path, a.info) == (b.rank, b.symbols, b.path, b.info)


def test_a_packed_list_gives_back_the_same_ranks_in_order(eight):
    packed = RankList([pack(r) for r in eight], eager_bytes=0)
    assert packed.packed and len(packed) == 8
    for a, b in zip(eight, packed):
        same_rank(a, b)
    same_rank(eight[-1], packed[-1])
    assert [x.rank for x in packed[2:5]] == [2, 3, 4]


def test_small_runs_are_unpacked_once(eight):
    eager = RankList([pack(r) for r in eight])  # well under EAGER_PACKED_BYTES
    assert not eager.packed
    assert eager[3] is eager[3]


def test_headers_agree_with_the_tables(eight):
    packed = RankList([pack(r) for r in eight], eager_bytes=0)
    for h, r in zip(packed.headers, eight):
        assert (h.rank, h.world_size, h.hostname, h.cpu_run) == (
            r.rank,
            r.world_size,
            r.hostname,
            r.cpu_run,
        )
        assert h.gpu_rows == len(r.gpu) > 0
        assert h.gpu_span_ns == (int(min(r.gpu.start_ns)), int(max(r.gpu.end_ns)))
        assert np.array_equal(h.steps.start_ns, r.steps.start_ns)


def test_at_most_recent_ranks_are_alive_while_every_rank_is_read(eight, monkeypatch):
    alive: list = []
    most = 0
    unpack = PackedRank.unpack

    def counted(self):
        nonlocal most
        r = unpack(self)
        alive.append(weakref.ref(r.gpu.start_ns))  # a rank's arrays live as long as it does
        gc.collect()
        most = max(most, sum(w() is not None for w in alive))
        return r

    monkeypatch.setattr(PackedRank, "unpack", counted)
    monkeypatch.setattr(ranks, "RECENT", 2)
    packed = RankList([pack(r) for r in eight], eager_bytes=0)
    for _ in range(2):
        for r in packed:
            assert len(r.gpu) > 0
    assert len(alive) == 16  # every read missed: two passes over 8 ranks, 2 kept
    assert most <= 3  # the 2 kept and the one being read


def test_a_packed_list_pickles_without_its_unpacked_ranks(eight):
    packed = RankList([pack(r) for r in eight], eager_bytes=0)
    _ = packed[0]
    back = pickle.loads(pickle.dumps(packed))
    assert back.packed
    for a, b in zip(back.headers, packed.headers):
        same_header(a, b)
    same_rank(back[5], eight[5])


def test_a_run_built_from_a_tuple_holds_a_rank_list(eight):
    run = load_run(DLRM)
    assert isinstance(run.ranks, RankList) and run.rank_ids == list(range(8))
    assert isinstance(run.ranks[0], tables.RankTrace)
    same_header(RankHeader.of(run.ranks[0]), run.ranks.headers[0])
