"""Decoding in parts and over a process pool gives exactly the tables of a one-process load."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tpscope.trace import load_run, parallel
from tpscope.trace.parallel import part_spans

DATA = Path(__file__).resolve().parent.parent / "data"


def assert_same_ranks(a, b):
    assert [r.rank for r in a.ranks] == [r.rank for r in b.ranks]
    for x, y in zip(a.ranks, b.ranks, strict=True):
        sx, sy = np.array(x.symbols, dtype=object), np.array(y.symbols, dtype=object)
        for field in x.gpu.__dataclass_fields__:
            u, v = getattr(x.gpu, field), getattr(y.gpu, field)
            if field in (
                "name_id",
                "signature_id",
                "coll_name_id",
                "pg_name_id",
                "dtype_id",
                "op_name_id",
                "dims_id",
                "types_id",
                "strides_id",
            ):
                u = np.where(u >= 0, sx[np.maximum(u, 0)], None)
                v = np.where(v >= 0, sy[np.maximum(v, 0)], None)
            assert np.array_equal(u, v), field
        assert np.array_equal(x.lanes, y.lanes)
        assert np.array_equal(x.steps.start_ns, y.steps.start_ns)
        assert np.array_equal(x.annotations.start_ns, y.annotations.start_ns)


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("indent", [None, 1])
def test_parts_hold_every_event(parts, indent):
    doc = json.load(gzip.open(next((DATA / "h200-shm-chunked4").glob("rank0*"))))
    doc["traceName"] = "after the events"
    buf = json.dumps(doc, indent=indent).encode()
    header = parallel.header_of(buf)
    spans = part_spans(buf, parts)
    assert spans is not None and len(spans) == parts
    assert [e for lo, hi in spans for e in json.loads(b"[" + buf[lo:hi] + b"]")] == doc[
        "traceEvents"
    ]
    assert header.distributedInfo.rank == doc["distributedInfo"]["rank"]
    assert header.baseTimeNanoseconds == doc["baseTimeNanoseconds"]


def test_no_cut_without_trace_events_or_room_between_events():
    assert part_spans(b'{"a": [{"b": 1}, {"c": 2}]}', 2) is None
    compact = json.dumps({"traceEvents": [{"a": 1}, {"b": 2}, {"c": 3}]}, separators=(",", ":"))
    assert part_spans(compact.encode(), 2) is None


@pytest.mark.parametrize("run", ["h200-shm-chunked4", "h200-nvlink-unfused"])
def test_file_in_parts_equals_one_piece(run, tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    for path in (DATA / run).glob("*.json.gz"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    used = []
    real = parallel.decode_in_parts
    monkeypatch.setattr(parallel, "decode_in_parts", lambda *a: used.append(real(*a)) or used[-1])
    one = load_run(tmp_path / sorted(p.name for p in tmp_path.iterdir())[0], workers=1)
    split = load_run(tmp_path / sorted(p.name for p in tmp_path.iterdir())[0], workers=2)
    assert len(used) == 1 and used[0] is not None  # the file really was read in two parts
    assert_same_ranks(one, split)


def test_many_files_over_a_pool_equal_one_process():
    assert_same_ranks(
        load_run(DATA / "h200-shm-chunked4", workers=1),
        load_run(DATA / "h200-shm-chunked4", workers=2),
    )


def test_a_cut_inside_an_event_falls_back_to_one_piece(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "SPLIT_MIN_BYTES", 0)
    # one kernel whose args hold a long list of objects: the cut lands inside it
    doc = {
        "distributedInfo": {"rank": 0},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "ts": 1,
                "dur": 2,
                "args": {"device": 0, "stream": 7, "l": [{"a": i} for i in range(50)]},
            }
        ],
    }
    text = json.dumps(doc, indent=2).encode()
    assert part_spans(text, 2) is not None  # a cut is found ...
    assert parallel.decode_in_parts(text, 2) is None  # ... and detected as bad
    path = tmp_path / "r.json"
    path.write_bytes(text)
    run = load_run(path, workers=2)
    assert len(run.ranks[0].gpu) == 1


def test_a_part_decoded_a_piece_at_a_time_equals_the_part_decoded_whole():
    from tpscope.trace.extract import SYMBOL_COLUMNS, extract
    from tpscope.trace.stream import decode_span

    doc = json.load(gzip.open(next((DATA / "h200-shm-chunked4").glob("rank0*"))))
    buf = json.dumps(doc, indent=1).encode()
    ((lo, hi),) = part_spans(buf, 1)
    whole = extract(json_events(buf[lo:hi]), 0)
    pieces = decode_span(buf, lo, hi, chunk_bytes=8192)  # about 60 pieces
    assert pieces is not None
    for group, cols in whole.groups.items():
        for name, col in cols.items():
            got = pieces.groups[group][name]
            if name in SYMBOL_COLUMNS:  # ids number the symbols in another order: compare the names
                col = np.array([whole.symbols[i] if i >= 0 else None for i in col.tolist()], object)
                got = np.array(
                    [pieces.symbols[i] if i >= 0 else None for i in got.tolist()], object
                )
            np.testing.assert_array_equal(got, col, err_msg=f"{group}.{name}")


def json_events(text: bytes):
    from tpscope.trace.decode import EVENTS_DECODER

    return EVENTS_DECODER.decode(b"[" + text + b"]")
