"""Decoding in parts and over a process pool gives exactly the tables of a one-process load."""

import gzip
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tpscope.trace import load_run
from tpscope.trace.read import parallel, strategy

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
                "pg_ranks_id",
                "pg_desc_id",
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


def _symbol_columns(raw):
    """Every column of raw columns, symbol ids replaced by their strings (parts number their
    symbols in another order)."""
    from tpscope.trace.read.extract import SYMBOL_COLUMNS

    out = {}
    for group, cols in raw.groups.items():
        for name, col in cols.items():
            if name in SYMBOL_COLUMNS:
                col = np.array([raw.symbols[i] if i >= 0 else None for i in col.tolist()], object)
            out[group, name] = col
    return out


def assert_same_raw(a, b):
    x, y = _symbol_columns(a), _symbol_columns(b)
    assert x.keys() == y.keys()
    for key in x:
        np.testing.assert_array_equal(x[key], y[key], err_msg=str(key))


def sample_text() -> bytes:
    """The shm-chunked sample's rank 0 as indented JSON text."""
    doc = json.load(gzip.open(next((DATA / "h200-shm-chunked4").glob("rank0*"))))
    return json.dumps(doc, indent=1).encode()


def gzipped_sample(tmp_path, monkeypatch) -> tuple[bytes, object]:
    """`sample_text()` and a gzip file of it, which rapidgzip's process reports 64 KiB at a time."""
    buf = sample_text()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(buf))
    monkeypatch.setattr(parallel, "INFLATE_STEP_BYTES", 1 << 16)
    return buf, path


def assert_holds_events(raw, text: bytes) -> None:
    """`raw` holds the events of `text`'s `traceEvents` array, as one piece read whole gives."""
    from tpscope.trace.read.extract import extract

    start = text.index(b"[", text.index(b'"traceEvents"'))
    assert_same_raw(raw, extract(json_events(text[start + 1 : text.rindex(b"]")]), 0))


def _forks(monkeypatch):
    """The spans the parent hands to the children forked to read parts, as (lo, hi)."""
    spans = []
    real = parallel.multiprocessing.get_context

    class Context:
        def __init__(self, ctx):
            self.ctx = ctx
            self.Pipe = ctx.Pipe

        def Process(self, target, args, **kwargs):
            if target is parallel._child:  # not the process that inflates a file whole
                spans.append(args[3:])
            return self.ctx.Process(target=target, args=args, **kwargs)

    monkeypatch.setattr(parallel.multiprocessing, "get_context", lambda m: Context(real(m)))
    return spans


@pytest.mark.parametrize("ends", [[20_000], [5_000, 60_000], [1, 2, 3]])
@pytest.mark.parametrize("indent", [None, 1])
@pytest.mark.parametrize("chunk_bytes", [333, 1 << 20])
def test_parts_hold_every_event(ends, indent, chunk_bytes, monkeypatch):
    from tpscope.trace.read.extract import extract

    doc = json.load(gzip.open(next((DATA / "h200-shm-chunked4").glob("rank0*"))))
    doc["traceName"] = "after the events"
    buf = json.dumps(doc, indent=indent).encode()
    forks = _forks(monkeypatch)
    got = parallel._in_parts(parallel._Stream(io.BytesIO(buf), chunk_bytes), ends)
    # one child per end, each cut after its end; the parts tile the array
    assert len(forks) == len(ends)
    start = buf.index(b"[", buf.index(b'"traceEvents"'))
    assert forks[0][0] == start + 1
    assert all(prev[1] + 1 == nxt[0] for prev, nxt in zip(forks, forks[1:]))
    commas = [m.start() + 1 for m in re.finditer(rb"\},\s+\{", buf)]  # json.dumps: a blank after
    targets = [max(end, lo) for (lo, _), end in zip(forks, ends)]
    assert [hi for _, hi in forks] == [min(c for c in commas if c >= t) for t in targets]
    assert_same_raw(got.raw, extract(json_events(buf[start + 1 : buf.rindex(b"]")]), 0))
    assert got.header.distributedInfo.rank == doc["distributedInfo"]["rank"]
    assert got.header.baseTimeNanoseconds == doc["baseTimeNanoseconds"]


def test_no_cut_without_trace_events_and_compact_text_cut_by_the_same_rule(monkeypatch):
    forks = _forks(monkeypatch)
    no_events = parallel._Stream(io.BytesIO(b'{"a": [{"b": 1}, {"c": 2}]}'))
    assert parallel._in_parts(no_events, [5]) is None
    assert forks == []
    events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": k, "dur": 1} for k in range(3)]
    compact = json.dumps({"traceEvents": events}, separators=(",", ":")).encode()
    # no blank between events: cut too
    got = parallel._in_parts(parallel._Stream(io.BytesIO(compact)), [20])
    assert len(forks) == 1 and compact[forks[0][1]] == ord(",")
    assert got is not None and got.raw.dropped == {}
    assert got.raw.groups["gpu"]["start_ns"].tolist() == [0, 1000, 2000]


def test_part_ends_let_every_part_finish_together():
    size, share = 1_000_000, 0.2
    for parts in (2, 3, 8):
        ends = parallel.part_ends(size, parts, share)
        lengths = np.diff([0, *ends, size])
        # part k starts when its end is gunzipped, the parent gunzips all, then decodes the last
        finish = [share * e + n for e, n in zip(ends, lengths)] + [share * size + lengths[-1]]
        assert max(finish) - min(finish) < 2, (parts, finish)
        assert all(lengths > 0)
    assert parallel.part_ends(1000, 4, 0.0) == [250, 500, 750]


def test_gzip_text_size_is_read_from_its_trailer(tmp_path):
    text = json.dumps({"traceEvents": [{"a": "x" * 1000}] * 300}).encode()
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(text))
    (tmp_path / "t.json").write_bytes(text)
    with open(tmp_path / "t.json.gz", "rb") as fh:
        assert parallel._text_size(fh) == (len(text), True) and fh.tell() == 0
    with open(tmp_path / "t.json", "rb") as fh:
        assert parallel._text_size(fh) == (len(text), False)


@pytest.mark.parametrize(
    "inflate_whole", [False, True], ids=["inflated-as-cut", "inflated-by-its-own-process"]
)
@pytest.mark.parametrize("run", ["h200-shm-chunked4", "h200-nvlink-unfused"])
def test_file_in_parts_equals_one_piece(run, inflate_whole, tmp_path, monkeypatch):
    monkeypatch.setattr(strategy, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(strategy, "THREADS_MIN_BYTES", 0)
    monkeypatch.setattr(strategy, "PARTS_MIN_WORKERS", 2)
    monkeypatch.setattr(strategy, "INFLATE_MIN_WORKERS", 2 if inflate_whole else 10**6)
    inflated = []

    class Counted(parallel._Inflater):
        def __init__(self, path, size, threads):
            inflated.append(threads)
            super().__init__(path, size, threads)

    monkeypatch.setattr(parallel, "_Inflater", Counted)
    for path in (DATA / run).glob("*.json.gz"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    used = []
    real = parallel.read_in_parts
    monkeypatch.setattr(parallel, "read_in_parts", lambda *a: used.append(real(*a)) or used[-1])
    forks = _forks(monkeypatch)
    one = load_run(tmp_path / sorted(p.name for p in tmp_path.iterdir())[0], workers=1)
    split = load_run(tmp_path / sorted(p.name for p in tmp_path.iterdir())[0], workers=2)
    assert len(used) == 1 and used[0] is not None and len(forks) == 1  # really in two parts
    assert inflated == ([2] if inflate_whole else [])  # two threads in a process, or this one
    assert_same_ranks(one, split)


@pytest.mark.parametrize("size_guess", ["last-member", "exact", "too-long"])
def test_a_gzip_file_is_inflated_whole_only_when_its_size_is_known(size_guess, tmp_path):
    """The text comes back whole, no byte more or less, where the size is the trailer's ISIZE of
    a one-member file; two gzip members (ISIZE is the last one's length alone) or a guess too long
    (past 4 GiB) give None: the file is then inflated as it is cut."""
    a = json.dumps({"traceEvents": [{"name": f"e{k}", "ts": k} for k in range(20_000)]})
    b = "x" * 300_000
    path = tmp_path / "t.json.gz"
    if size_guess == "last-member":
        path.write_bytes(gzip.compress(a.encode()) + gzip.compress(b.encode()))
        size = len(b)
    else:
        path.write_bytes(gzip.compress((a + b).encode()))
        size = len(a + b) + (9 if size_guess == "too-long" else 0)
    with open(path, "rb") as fh:
        assert parallel._text_size(fh)[0] == size or size_guess == "too-long"
    inflater = parallel._Inflater(path, size, 2)
    landed = list(inflater.landed())
    inflater.close()
    assert inflater._proc.exitcode == 0
    if size_guess == "exact":
        assert inflater.whole and inflater.buf[:] == (a + b).encode()
        assert landed == sorted(landed) and landed[-1] == size  # reported as it was written
    else:
        assert not inflater.whole


def test_parts_are_forked_while_the_inflater_is_still_writing(tmp_path, monkeypatch):
    """Rapidgzip's process reports each step it writes: the first parts are forked (and read
    back) before the text is all there, and the parts hold the file's events."""

    buf, path = gzipped_sample(tmp_path, monkeypatch)
    forked_at, real_fork = [], parallel._fork_parts

    def fork(ctx, text, ends, commas, children, filled):
        before = len(children)
        real_fork(ctx, text, ends, commas, children, filled)
        forked_at.extend([filled] * (len(children) - before))

    monkeypatch.setattr(parallel, "_fork_parts", fork)
    got = parallel.read_in_parts(path, 4, inflate_threads=2)
    assert len(forked_at) == 3 and forked_at[0] < len(buf)  # before the text was all there
    assert_holds_events(got.raw, buf)


def test_a_task_while_inflating_runs_once_before_any_part_is_forked(tmp_path, monkeypatch):
    """A task given to `while_inflating` runs once, in the first read whose text rapidgzip's
    process inflates, before any part is forked; a read that streams its text runs none, and the
    block's end drops a task not run. The parts still hold the file's events."""

    buf, path = gzipped_sample(tmp_path, monkeypatch)
    forked, real_fork = [], parallel._fork_parts

    def fork(ctx, text, ends, commas, children, filled):
        real_fork(ctx, text, ends, commas, children, filled)
        forked.append(len(children))

    monkeypatch.setattr(parallel, "_fork_parts", fork)
    ran = []
    with parallel.while_inflating(lambda: ran.append(sum(forked))):
        parallel.read_in_parts(path, 3, inflate_threads=1)  # streamed
        assert ran == []
        forked.clear()
        got = parallel.read_in_parts(path, 3, inflate_threads=2)
        assert sum(forked) > 0 and ran == [0]  # run before the first part was forked
        parallel.read_in_parts(path, 3, inflate_threads=2)
    assert ran == [0]  # once
    with parallel.while_inflating(lambda: ran.append("not run")):
        pass
    parallel.read_in_parts(path, 3, inflate_threads=2)
    assert ran == [0]
    assert_holds_events(got.raw, buf)


def test_a_gzip_file_of_two_members_is_read_again_as_a_stream(tmp_path, monkeypatch):
    """Two gzip members: the trailer's size is the last member's alone, so the inflater's text is
    not the whole file; the parts forked on it are ended, the file is inflated again as it is
    cut, and its parts hold every event."""

    buf = sample_text()
    half = len(buf) // 2
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(buf[:half]) + gzip.compress(buf[half:]))
    monkeypatch.setattr(parallel, "INFLATE_STEP_BYTES", 1 << 14)
    sources, real_in_parts = [], parallel._in_parts
    monkeypatch.setattr(
        parallel, "_in_parts", lambda src, ends: sources.append(src) or real_in_parts(src, ends)
    )
    got = parallel.read_in_parts(path, 3, inflate_threads=2)
    assert [type(s).__name__ for s in sources] == ["_Inflater", "_Stream"]
    assert not sources[0].whole and sources[0]._proc.exitcode is not None  # ended and reaped
    assert_holds_events(got.raw, buf)


def test_many_files_over_a_pool_equal_one_process():
    assert_same_ranks(
        load_run(DATA / "h200-shm-chunked4", workers=1),
        load_run(DATA / "h200-shm-chunked4", workers=2),
    )


def test_a_cut_inside_an_event_falls_back_to_one_piece(tmp_path, monkeypatch):
    monkeypatch.setattr(strategy, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(strategy, "THREADS_MIN_BYTES", 0)
    monkeypatch.setattr(strategy, "PARTS_MIN_WORKERS", 2)
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
    forks = _forks(monkeypatch)
    # a cut is made inside the event, and found bad
    assert parallel._in_parts(parallel._Stream(io.BytesIO(text)), [len(text) // 2]) is None
    assert len(forks) == 1
    path = tmp_path / "r.json"
    path.write_bytes(text)
    run = load_run(path, workers=2)
    assert len(run.ranks[0].gpu) == 1


@pytest.mark.parametrize("reader", ["C", "msgspec"])
@pytest.mark.parametrize("nested", [False, True])
def test_a_part_decoded_a_piece_at_a_time_equals_the_part_decoded_whole(
    reader, nested, monkeypatch
):
    """With `nested`, events whose arguments hold lists of objects (`}, {` inside an event) longer
    than a piece: a piece cut inside one is not JSON and grows to a later boundary."""
    from tpscope.trace.read import stream
    from tpscope.trace.read.extract import SYMBOL_COLUMNS, extract
    from tpscope.trace.read.stream import decode_span

    if reader == "msgspec":  # as where the C reader is not built
        monkeypatch.setattr(stream, "extract_text", lambda *a, **k: None)
    doc = json.load(gzip.open(next((DATA / "h200-shm-chunked4").glob("rank0*"))))
    if nested:
        for k, event in enumerate(doc["traceEvents"][::50]):
            event.setdefault("args", {})["parts"] = [{"k": j} for j in range(700 + k)]
    buf = json.dumps(doc, indent=1).encode()
    lo, hi = buf.index(b"[", buf.index(b'"traceEvents"')) + 1, buf.rindex(b"]")
    whole = extract(json_events(buf[lo:hi]), 0)
    pieces = decode_span(buf, lo, hi, chunk_bytes=8192)  # at least 60 pieces
    assert pieces is not None
    assert bytes(buf) == json.dumps(doc, indent=1).encode()  # the text is left as it was
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
    from tpscope.trace.read.decode import EVENTS_DECODER

    return EVENTS_DECODER.decode(b"[" + text + b"]")


def test_a_sent_part_is_taken_while_the_rest_is_read(monkeypatch):
    """A part its child has written is read back between reads (its memory freed before the text
    is all inflated), and the parts taken so are the file's events."""
    import time

    buf = sample_text()
    read_all = []

    class Slow(io.BytesIO):  # a slow inflate: the children finish while it is read
        def read(self, n=-1):
            time.sleep(0.02)
            data = super().read(n)
            if not data:
                read_all.append(True)
            return data

    taken_early = []
    real = parallel._receive
    monkeypatch.setattr(
        parallel, "_receive", lambda recv: taken_early.append(not read_all) or real(recv)
    )
    got = parallel._in_parts(parallel._Stream(Slow(buf), 1 << 14), [5_000, 60_000])
    assert len(taken_early) == 2 and any(taken_early)
    assert_holds_events(got.raw, buf)


def test_a_result_written_to_an_anonymous_file_lets_its_writer_exit_before_it_is_read():
    """A forked process writes 8 MB of columns (a pipe holds 64 KiB) and exits before the parent
    reads them; what the parent reads back is what was written, and the file is not inherited by
    programs the parent runs."""
    import multiprocessing
    import subprocess
    import sys

    columns = {"ts": np.arange(1_000_000, dtype=np.int64), "name": ["a", "é"] * 3}
    out = parallel.anonymous_file()
    try:
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=lambda: send.send(parallel.write_pickled(out, columns)))
        proc.start()
        proc.join(timeout=20)
        assert proc.exitcode == 0  # done before anything was read
        back = parallel.read_pickled(out, recv.recv())
        np.testing.assert_array_equal(back["ts"], columns["ts"])
        assert back["name"] == columns["name"]
        probe = f"import os; os.fstat({out})"
        assert subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode != 0
    finally:
        os.close(out)
