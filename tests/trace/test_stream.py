"""The streaming decode (trace/read/stream.py) against the one-piece reader, and its memory bound."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import pickle
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from tpscope.trace import run_folder
from tpscope.trace.read import stream
from tpscope.trace.read.decode import EVENTS_DECODER, TRACE_DECODER
from tpscope.trace.read.extract import SYMBOL_COLUMNS, extract

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import reader_memory  # noqa: E402 - the layouts the reader is measured on

CORPUS = ROOT / "tests" / "data"


def assert_same_rank(a, b, path: str = "") -> None:
    """Field for field; symbol-id columns (int32 `*_id`) compared by the names they point to (the
    parts of a streamed file number their symbols in another order)."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        where = f"{path}.{f.name}"
        if f.name in ("symbols", "path"):
            continue
        if dataclasses.is_dataclass(x):
            assert_same_rank_table(x, y, a.symbols, b.symbols, where)
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=where)
        else:
            assert x == y, where


def assert_same_rank_table(x, y, sx, sy, where: str) -> None:
    for g in dataclasses.fields(x):
        u, v = getattr(x, g.name), getattr(y, g.name)
        if g.name.endswith("_id") and u.dtype == np.int32:  # a symbol id (external_id is int64)
            names_x = np.array([*sx, None], dtype=object)[u]
            names_y = np.array([*sy, None], dtype=object)[v]
            assert names_x.tolist() == names_y.tolist(), f"{where}.{g.name}"
        elif isinstance(u, np.ndarray):
            assert u.dtype == v.dtype, f"{where}.{g.name}"
            np.testing.assert_array_equal(u, v, err_msg=f"{where}.{g.name}")
        else:
            assert u == v, f"{where}.{g.name}"


def one_piece(path: Path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(stream, "decode_streaming", lambda fh, chunk_bytes, threads=1: None)
        return run_folder.load_rank_file(path)


REAL_FILES = [
    *sorted((ROOT / "sample_traces" / "h200x2-shm-chunked").glob("*.json.gz")),
    *sorted((ROOT / "sample_traces" / "h200x1-nested-loop").glob("*.json.gz")),
    *sorted(CORPUS.glob("real/param-dlrm-torchrec-v100x8/worker0*.json.gz")),
    *sorted(CORPUS.glob("real/tracelens-b200-eager-rank0of8/*.json.gz")),
    *sorted(CORPUS.glob("hta/trace_filter/*.json.gz")),
]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: f"{p.parent.name}/{p.name[:24]}")
def test_streamed_equals_one_piece(path, monkeypatch):
    with path.open("rb") as fh:
        assert stream.decode_streaming(fh, 1 << 14) is not None  # streamed, not the fallback
    streamed = run_folder.load_rank_file(path, chunk_bytes=1 << 14)  # dozens of parts per file
    assert_same_rank(streamed, one_piece(path, monkeypatch))


# the other args of a real H200 kernel event (torch 2.11), which no table keeps
KERNEL_ARGS = {
    "queued": 0,
    "device": 0,
    "context": 1,
    "stream": 7,
    "registers per thread": 168,
    "shared memory": 213248,
    "blocks per SM": 1.0,
    "warps per SM": 8.0,
    "grid": [132, 1, 1],
    "block": [384, 1, 1],
    "est. achieved occupancy %": 13,
    "kind": "Dispatch Kernel",
}


def _doc(n: int, tail: dict | None = None) -> dict:
    events = []
    for k in range(n):
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{k % 7}",
                "pid": 0,
                "tid": 7,
                "ts": 10.0 * k,
                "dur": 5.0,
                "args": {**KERNEL_ARGS, "correlation": k},
            }
        )
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0}, {"id": 1}],
        "distributedInfo": {"rank": 3, "world_size": 4},
        "traceEvents": events,
    }
    doc.update(tail or {})
    return doc


def test_threads_give_the_columns_of_one_thread(monkeypatch):
    from tpscope.trace.read import cut

    spans = []
    real = cut.spans
    monkeypatch.setattr(cut, "spans", lambda *a: spans.append(real(*a)) or spans[-1])
    text = gzip.compress(json.dumps(_doc(20_000), indent=1).encode())  # 7 MB of JSON
    one = stream.decode_streaming(io.BytesIO(text), 4 << 20)
    assert spans == []
    threaded = stream.decode_streaming(io.BytesIO(text), 4 << 20, threads=2)
    assert spans and all(len(s) == 2 for s in spans)  # each chunk really read by two threads
    for group, cols in one.raw.groups.items():  # symbol ids: two parts merged, renumbered
        for name, col in cols.items():
            got = threaded.raw.groups[group][name]
            if name in SYMBOL_COLUMNS:
                col = np.array(one.raw.symbols, object)[col]
                got = np.array(threaded.raw.symbols, object)[got]
            np.testing.assert_array_equal(col, got, err_msg=f"{group}.{name}")
    assert len(threaded.raw.groups["gpu"]["start_ns"]) == 20_000
    # a file that breaks off: the thread reading ahead hands its error over, and the file goes
    # to the one-piece reader, which names the problem
    assert stream.decode_streaming(io.BytesIO(text[: len(text) // 2]), 1 << 20, threads=2) is None


def test_keys_after_the_array_with_arrays_of_objects():
    """Kineto writes keys after `traceEvents`, some of them arrays of objects: the array's end is
    found, the header read, and `baseTimeNanoseconds` (given last) shifts every time."""
    tail = {"traceName": "x", "logs": [{"a": 1}, {"b": 2}], "baseTimeNanoseconds": 5_000_000}
    text = json.dumps(_doc(3000, tail), indent=1).encode()
    parts = stream.decode_streaming(io.BytesIO(gzip.compress(text)), 4096)
    assert parts is not None
    assert parts.header.baseTimeNanoseconds == 5_000_000
    assert parts.header.distributedInfo.rank == 3
    start = parts.raw.groups["gpu"]["start_ns"]
    assert len(start) == 3000
    np.testing.assert_array_equal(start, np.arange(3000) * 10_000)  # 10 µs apart, in ns


def test_a_boundary_inside_a_string_is_never_silently_wrong():
    """A name holding `}, {` makes a cut inside an event; the part does not decode and the whole
    file is left to the one-piece reader (None), never half read."""
    doc = _doc(200)
    for e in doc["traceEvents"]:
        e["name"] = "weird }, { name " + "x" * 64
    text = json.dumps(doc, indent=1).encode()
    out = stream.decode_streaming(io.BytesIO(text), 1024)
    if out is not None:  # every cut fell on a real boundary: then it must be exact
        np.testing.assert_array_equal(out.raw.groups["gpu"]["correlation"], np.arange(200))
    whole = extract(TRACE_DECODER.decode(text).traceEvents)
    assert len(whole.groups["gpu"]["start_ns"]) == 200


def test_empty_or_foreign_text_goes_to_the_one_piece_reader():
    assert stream.decode_streaming(io.BytesIO(b'{"traceEvents": []}'), 1024) is None
    assert stream.decode_streaming(io.BytesIO(b'[{"ph": "X"}]'), 1024) is None
    assert stream.decode_streaming(io.BytesIO(b"\x1f\x8b broken gzip"), 1024) is None


def test_peak_memory_is_bounded_by_the_chunk_not_the_file():
    """Python-heap peak (tracemalloc traces msgspec's structs and numpy's arrays) above the result
    itself: a streamed decode with 256 KiB chunks against decoding the same text in one piece."""
    text = json.dumps(_doc(100_000), indent=1).encode()  # ~40 MB of text
    tracemalloc.start()
    try:
        out = stream.decode_streaming(io.BytesIO(text), 1 << 18)
        kept, streamed_peak = tracemalloc.get_traced_memory()
        del out
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        events = EVENTS_DECODER.decode(
            text[text.index(b"[", text.index(b'"traceEvents"')) : text.rindex(b"]") + 1]
        )
        extract(events)
        _, whole_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    streamed_extra = streamed_peak - kept
    whole_extra = whole_peak - base - kept
    assert streamed_extra < whole_extra / 4, (streamed_extra, whole_extra)


# Peak resident memory of a streamed read in a process of its own: the reader's memory above
# the process before it, less the columns it returns (held twice while its parts are merged)
_MEASURE = r"""
import io, json, pickle, re, sys
from tpscope.trace.read import native, stream

def status(key):
    return int(re.search(key + r":\s+(\d+)", open("/proc/self/status").read()).group(1)) * 1024

path, chunk, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
native.extract_text.__defaults__ = (chunk // 16, 1)  # C's chunk: 1/16 of the stream's, as by default
stream.decode_streaming(io.BytesIO(open(warm, "rb").read()), 1 << 16)  # first-use imports
with open(path, "rb") as fh:
    base = status("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts from here
    out = stream.decode_streaming(fh, chunk)
    peak = status("VmHWM")
kept = sum(a.nbytes for g in out.raw.groups.values() for a in g.values())
kept += sum(len(s.encode()) for s in out.raw.symbols)
pickle.dump(out.raw, open(path + ".raw", "wb"))
print(json.dumps({"extra": peak - base - 2 * kept}))
"""

_CHUNK = 1 << 21  # the stream's chunk in these tests
_BIG = 1 << 23  # what no chunk can cut: an event, a run of blanks
TINY_BOUND = 8  # times the chunk, for events far shorter than Kineto's (docs/benchmarks.md)


def _layouts() -> dict[str, tuple[bytes, int]]:
    """Layout -> (its text, the text in flight), as `benchmarks/reader_memory.py` lays them out:
    the stream's chunk, plus a run no cut can split; for tiny events (18 bytes, no table keeps
    them), whose columns and not their text bound them (one per 128 bytes of a call's span at
    most, ~270 bytes each in C and while grouped), the bound over 3."""
    out = reader_memory.layouts(_BIG, _CHUNK)
    text, _ = out["tiny events (18 bytes)"]
    out["tiny events (18 bytes)"] = (text, TINY_BOUND * _CHUNK // 3)
    return out


@pytest.mark.parametrize("layout", list(_layouts()))
def test_reading_memory_is_bounded_by_the_text_in_flight(layout, tmp_path):
    """Peak resident memory of reading, in a fresh process, at most 3x the text in flight (the
    chunk, or an event or a run no cut can split), whatever the layout; and the columns equal
    those of the one-piece reader (decode.py) with the events extracted by `extract.py`."""
    text, in_flight = _layouts()[layout]
    path, warm = tmp_path / "trace.json", tmp_path / "warm.json"
    path.write_bytes(text)
    warm.write_bytes(reader_memory.trace(reader_memory.events(3000)))
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(_CHUNK), str(warm)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    extra = json.loads(done.stdout)["extra"]
    assert extra <= 3 * in_flight, f"{extra / in_flight:.2f}x the text in flight"
    got = pickle.loads((tmp_path / "trace.json.raw").read_bytes())
    ref = extract(TRACE_DECODER.decode(text).traceEvents, 0)
    for group, cols in ref.groups.items():
        for name, col in cols.items():
            new = got.groups[group][name]
            if name in SYMBOL_COLUMNS:
                col, new = (np.array(r.symbols, object)[c] for r, c in ((ref, col), (got, new)))
            np.testing.assert_array_equal(col, new, err_msg=f"{group}.{name}")
