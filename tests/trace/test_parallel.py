"""Decoding in parts and over a process pool gives exactly the tables of a one-process load."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tpscope.trace import load_run, parallel
from tpscope.trace.parallel import split_document

DATA = Path(__file__).resolve().parent.parent / "data"


def assert_same_ranks(a, b):
    assert [r.rank for r in a.ranks] == [r.rank for r in b.ranks]
    for x, y in zip(a.ranks, b.ranks, strict=True):
        sx, sy = np.array(x.symbols, dtype=object), np.array(y.symbols, dtype=object)
        for field in x.gpu.__dataclass_fields__:
            u, v = getattr(x.gpu, field), getattr(y.gpu, field)
            if field in ("name_id", "signature_id", "coll_name_id", "pg_name_id", "dtype_id"):
                u = np.where(u >= 0, sx[np.maximum(u, 0)], None)
                v = np.where(v >= 0, sy[np.maximum(v, 0)], None)
            assert np.array_equal(u, v), field
        assert np.array_equal(x.lanes, y.lanes)
        assert np.array_equal(x.steps.start_ns, y.steps.start_ns)
        assert np.array_equal(x.annotations.start_ns, y.annotations.start_ns)


@pytest.mark.parametrize("parts", [2, 3])
def test_split_documents_hold_every_event(parts):
    doc = json.load(gzip.open(next((DATA / "h200-shm-chunked4").glob("rank0*"))))
    data = json.dumps(doc, indent=1).encode()
    pieces = split_document(data, parts)
    assert pieces is not None and len(pieces) == parts
    decoded = [json.loads(p) for p in pieces]
    assert sum(len(d["traceEvents"]) for d in decoded) == len(doc["traceEvents"])
    assert [e for d in decoded for e in d["traceEvents"]] == doc["traceEvents"]


def test_no_cut_in_a_document_without_trace_events():
    assert split_document(b'{"a": [{"b": 1}, {"c": 2}]}', 2) is None


@pytest.mark.parametrize("run", ["h200-shm-chunked4", "h200-nvlink-unfused"])
def test_file_in_parts_equals_one_piece(run, tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    for path in (DATA / run).glob("*.json.gz"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    one = load_run(tmp_path / sorted(p.name for p in tmp_path.iterdir())[0], workers=1)
    split = load_run(tmp_path / sorted(p.name for p in tmp_path.iterdir())[0], workers=2)
    assert_same_ranks(one, split)


def test_many_files_over_a_pool_equal_one_process():
    assert_same_ranks(load_run(DATA / "h200-shm-chunked4", workers=1), load_run(DATA / "h200-shm-chunked4", workers=2))


def test_a_cut_inside_an_event_falls_back_to_one_piece(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    # one kernel whose args hold a list of objects: the only '},{' boundary lies inside it
    doc = {"distributedInfo": {"rank": 0}, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 2,
         "args": {"device": 0, "stream": 7, "l": [{"a": 1}, {"b": 2}]}}]}
    text = json.dumps(doc, separators=(",", ":")).encode()
    pieces = split_document(text, 2)
    assert pieces is not None
    assert parallel.decode_in_parts(pieces) is None  # the cut is detected as bad
    path = tmp_path / "r.json"
    path.write_bytes(text)
    run = load_run(path, workers=2)
    assert len(run.ranks[0].gpu) == 1
