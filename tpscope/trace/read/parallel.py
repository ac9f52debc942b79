"""Use every core: big trace files decoded in parts, many rank files over a process pool.

One file: the `traceEvents` array of the text is cut at event boundaries into one run of events
per core; each run is decoded and extracted (`extract.py`) in its own process (forked, so the text
is shared, not copied or sent), a piece of `stream.CHUNK_BYTES` at a time so that only one piece's
events exist at once, and the raw columns come back pickled into an anonymous file in memory
(`anonymous_file`: written at once, where a pipe would hold the process until read) and are
merged. A cut that does not give valid JSON (an unusual layout) is detected by the decoder, and
the file is then read another way (streamed in one process, else in one piece:
`run_folder._read_raw`).

A gzip file is cut while it is being gunzipped (`read_in_parts`): each part's process is forked
as soon as its text is there, so the parts decode while the rest is still inflating, and the
parts done are read back meanwhile. The earlier parts are made longer, so that all finish
together (`part_ends`). With rapidgzip on many cores a process of its own inflates the file over
many threads and says how far it has written (`INFLATE_STEP_BYTES`).

Many files: each worker process loads whole files and returns their compact tables, so the
parent never holds more than the workers' files' events at once.
"""

from __future__ import annotations

import contextlib
import importlib.util
import mmap
import multiprocessing
import os
import pickle
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import msgspec
import numpy as np

from tpscope.trace.read import cut
from tpscope.trace.read.decode import GZIP_MAGIC, TRACE_DECODER
from tpscope.trace.read.extract import merge
from tpscope.trace.read.schema import TraceFile
from tpscope.trace.read.stream import (
    CHUNK_BYTES,
    READ_ERRORS,
    DecodedParts,
    decode_span,
    open_text,
)

# the compressed bytes each of rapidgzip's threads inflates at a time: a 30 MB gzip file gives all
# 16 threads work, and the decoded chunks it holds ahead are a quarter of those of its 4 MiB
# default (docs/benchmarks.md)
INFLATE_CHUNK_BYTES = 512 << 10
# gunzipping a byte of trace text is taken to cost this share of decoding and extracting it
# (docs/benchmarks.md): it sets how much longer the earlier parts of a gzip file are
GUNZIP_SHARE = 0.2
# the same share where rapidgzip inflates on 16 cores (a 1 M-event tile's 366 MB in 0.23 s over
# 16 threads, a 24 MB part decoded in 0.08 s, on the lent 16-core machine; parts so sized beat
# equal parts and parts longer by two fifths each: docs/benchmarks.md)
PARALLEL_GUNZIP_SHARE = 0.2
# how much text the parallel inflater writes between its reports, so that the parts are forked as
# their text lands; None: it reports once, the text whole, and the parts are all forked then
INFLATE_STEP_BYTES: int | None = 8 << 20
# tasks run once in the time a parallel read first waits for inflated text (`while_inflating`)
_WHILE_INFLATING: list[Callable[[], object]] = []


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Forking is safe only from a single-threaded process (no server threads holding locks)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def can_inflate_in_parallel() -> bool:
    """Whether rapidgzip, which inflates one gzip file over many threads, is installed."""
    return importlib.util.find_spec("rapidgzip") is not None


def _array_start(buf: bytes | bytearray | mmap.mmap, filled: int) -> int:
    """Index of the `[` that opens the `traceEvents` array in `buf[:filled]`, -1 when not (yet)
    seen."""
    key = buf.find(b'"traceEvents"', 0, filled)
    return buf.find(b"[", key, filled) if key >= 0 else -1


def part_ends(size: int, parts: int, gunzip_share: float = GUNZIP_SHARE) -> list[int]:
    """Where the first `parts - 1` parts of a text of `size` bytes should end when the text is
    gunzipped as it is cut: part k's process starts once its end is inflated, and the parent,
    which inflates everything, decodes the last part. With inflating at r = `gunzip_share` of the
    decoding cost per byte, all parts finish at T when part k ends at e_k = (e_{k-1} + T) / (1 + r),
    that is e_k = T * w_k with w_k = sum over j = 1..k of (1 + r)^-j; the last part, finishing at
    T = r * size + (size - e_{parts-1}), gives T = size * (1 + r) / (1 + w_{parts-1})."""
    weights = np.cumsum((1 + gunzip_share) ** -np.arange(1.0, parts))
    finish = size * (1 + gunzip_share) / (1 + (weights[-1] if parts > 1 else 0.0))
    return [min(size, round(e)) for e in (finish * weights).tolist()]


def header_of(buf: bytes) -> TraceFile | None:
    """The top-level keys before and after the `traceEvents` array, without the events."""
    key = buf.find(b'"traceEvents"')
    end = buf.rfind(b"]")
    before = bytes(buf[:key]).rstrip()
    after = bytes(buf[end + 1 :]).lstrip(b" \t\r\n,")
    text = before + (b"" if before.endswith((b"{", b",")) else b",") + after
    try:
        return TRACE_DECODER.decode(text)
    except (
        msgspec.DecodeError,
        msgspec.ValidationError,
        RecursionError,
    ):
        # read in one piece, which says why
        return None


def _child(conn, out: int, buf: bytes, lo: int, hi: int) -> None:
    """Worker body: decode one part, write its raw columns pickled into the file `out` and
    send their length, leave without tearing down."""
    try:
        conn.send(write_pickled(out, decode_span(buf, lo, hi)))
    except BaseException:  # noqa: BLE001 - the parent treats any failure as "read in one piece"
        try:
            conn.send(None)
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(0)  # skip freeing half a million events: the process ends here


def anonymous_file() -> int:
    """A file descriptor of an anonymous file in memory (`memfd`; elsewhere than Linux, an
    unlinked temporary file) that processes forked after it share, not passed on to programs a
    process runs. A result written there is read back at memory speed, where a pipe passes it
    64 KiB at a time and holds its writer until the reader takes it."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("tpscope", os.MFD_CLOEXEC)
    fh = tempfile.TemporaryFile()
    fd = os.dup(fh.fileno())
    fh.close()
    os.set_inheritable(fd, False)
    return fd


def write_bytes(fd: int, data: bytes | memoryview) -> int:
    """`data` written at the start of the file `fd`; its length."""
    view, done = memoryview(data), 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], done)
    return done


def write_pickled(fd: int, value) -> int:
    """`value` pickled at the start of the file `fd`; the length of its pickle."""
    return write_bytes(fd, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def read_pickled(fd: int, size: int):
    """What `write_pickled` wrote into `fd` (`size` bytes)."""
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped:
        return pickle.loads(mapped)


def text_size(path) -> int | None:
    """The length of a file's (gunzipped) text; None when it cannot be opened."""
    try:
        with open(path, "rb") as fh:
            return _text_size(fh)[0]
    except OSError:
        return None


def read_in_parts(path, workers: int, inflate_threads: int = 1) -> DecodedParts | None:
    """Read a trace file in `workers` processes, each part forked as soon as its text is read
    (gunzipped on the way when it is gzip); None when it cannot be read or cut cleanly (the
    caller reads it another way). With `inflate_threads` > 1 a gzip file is inflated by that
    many threads (rapidgzip) in a process of its own, which reports how much it has written
    (`INFLATE_STEP_BYTES`), and the parts are forked as the text lands, the same way.
    `strategy.choose` decides when this pays."""
    try:
        with open(path, "rb") as fh:
            size, gzipped = _text_size(fh)
            if workers < 2:
                return None
            if gzipped and inflate_threads > 1 and size > 0:
                share = PARALLEL_GUNZIP_SHARE if INFLATE_STEP_BYTES else 0.0
                ends = part_ends(size, workers, share)
                found = _in_parts(_Inflater(path, size, inflate_threads), ends)
                if found is not _NOT_WHOLE:
                    return found
                # several gzip members or past 4 GiB: inflated in one stream as it is cut
            ends = part_ends(size, workers, GUNZIP_SHARE if gzipped else 0.0)
            return _in_parts(_Stream(open_text(fh)), ends)
    except READ_ERRORS:
        return None


class _Stream:
    """Text read from a file object a chunk at a time, into a growing buffer (`landed`); what it
    reads is all the text there is (`whole`)."""

    whole = True

    def __init__(self, text, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.buf = bytearray()
        self._text, self._chunk = text, chunk_bytes

    def landed(self):
        """How much of `buf` holds text, after each read."""
        while data := self._text.read(self._chunk):
            self.buf += data
            yield len(self.buf)

    def close(self) -> None:
        pass


class _Inflater:
    """A gzip file's text, inflated by `threads` threads at once (rapidgzip finds where each block
    starts and inflates the blocks in parallel) in a forked process, into memory it shares with
    this one (`buf`, `size` bytes): the inflater's own allocator keeps its buffers (a few hundred
    MB on 16 threads) until its process ends. It says how much it has written every
    INFLATE_STEP_BYTES, else once the text is there (`landed`); `whole` is then whether the
    text was `size` bytes (not with several gzip members, or past 4 GiB) and could be inflated;
    before the first text comes, this process runs the tasks given to `while_inflating`. Its
    process ends by itself once it has said so (its memory given back while the text is
    decoded); `close` reaps it, or ends it where its text is not wanted."""

    def __init__(self, path, size: int, threads: int) -> None:
        self.buf = mmap.mmap(-1, size)  # anonymous and shared: written there, read here
        self.whole = False
        self._said_end = False  # its process has said all it will, and ends by itself
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(
            target=_inflate_into, args=(send, path, self.buf, threads), daemon=True
        )
        self._proc.start()
        send.close()

    def landed(self):
        while _WHILE_INFLATING:  # in the time the first text takes to come
            _WHILE_INFLATING.pop(0)()
        while (message := _receive(self._recv)) is not None:
            kind, value = message
            if kind == "end":
                self.whole, self._said_end = value, True
                return
            yield value
        self._said_end = True  # it ended without a word: nothing more comes

    def close(self) -> None:
        if not self._said_end:
            self._proc.kill()  # left before the text was all there: its work is not wanted
        self._proc.join()
        self._recv.close()


def _inflate_into(send, path, text: mmap.mmap, threads: int) -> None:
    """The inflating process's body: `text` filled, ("at", bytes written so far) sent every
    INFLATE_STEP_BYTES (else once, when filled), then ("end", whether it holds the whole file)."""
    try:
        import rapidgzip  # only here: the one reader that uses it

        view, done, step = memoryview(text), 0, INFLATE_STEP_BYTES or len(text)
        with rapidgzip.RapidgzipFile(
            str(path), parallelization=threads, chunk_size=INFLATE_CHUNK_BYTES
        ) as gz:
            while done < len(text):
                n = gz.readinto(view[done : done + step])
                if not n:
                    break
                done += n
                send.send(("at", done))
            whole = done == len(text) and not gz.read(1)
        view.release()
        send.send(("end", whole))
    except BaseException:  # noqa: BLE001 - the parent reads the file another way
        try:
            send.send(("end", False))
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(0)


def _text_size(fh) -> tuple[int, bool]:
    """The length of the file's text and whether it is gzip: its size, or for gzip its
    trailer's ISIZE, the length modulo 2^32 (past 4 GiB a guess: it sets where the parts end,
    never what they hold)."""
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    gzipped = fh.read(2) == GZIP_MAGIC and size >= 18
    if gzipped:
        fh.seek(-4, os.SEEK_END)
        text = int.from_bytes(fh.read(4), "little")
        while text < size:  # a text shorter than its gzip file: wrapped past 4 GiB
            text += 2**32
        size = text
    fh.seek(0)
    return size, gzipped


_NOT_WHOLE = object()  # `_in_parts`: the inflater's text was not the whole file


def _in_parts(source, ends: list[int]) -> DecodedParts | None:
    """Read `source` (`_Stream` or `_Inflater`) as it lands; fork one process per part as soon
    as the event boundary after its end (`ends`) is there; the parent decodes the last part once
    all is read. Parts end at event boundaries (`cut.py`); where there is none, the parent
    decodes the rest itself. A cut inside an event (a nested `}, {`) gives invalid JSON, which
    the decoder reports, so it is never silently wrong. A child writes its part's columns into a
    file in memory and exits; a part written is read back while the rest lands. Returns
    `_NOT_WHOLE` where an inflater's text was not the whole file."""
    ctx = multiprocessing.get_context("fork")
    buf = source.buf
    commas: list[int] = []  # the array's "[", then the comma after each forked part
    children: list = []
    received: dict[int, object] = {}  # a part's columns, taken as soon as its child sends them
    done = False
    try:
        for filled in source.landed():
            _take_ready(children, received)  # the parts written so far, read while text lands
            _fork_parts(ctx, buf, ends, commas, children, filled)
        if not source.whole:
            return _NOT_WHOLE
        end = buf.rfind(b"]")
        header = header_of(buf) if commas else None
        if header is None or end <= commas[-1]:
            return None  # no array, or a cut past its end: the caller reads the file another way
        last = decode_span(buf, commas[-1] + 1, end)
        source.buf = buf = None  # the text freed once no part needs it
        results = [
            received[k] if k in received else _receive_part(child)
            for k, child in enumerate(children)
        ] + [last]
        done = True
    finally:
        source.close()
        for proc, _, out in children:
            if not done:  # an error or an early return: the parts are not wanted
                proc.kill()
            proc.join()
            os.close(out)
    if any(r is None for r in results):
        return None
    return DecodedParts(header=header, raw=merge(results))


@contextlib.contextmanager
def while_inflating(task: Callable[[], object]):
    """Within the block, `task()` is run once by the first file read whose text a process of its
    own inflates (`read_in_parts`), in the time this process would only wait for the text (a
    command's later modules loaded there); where no file is so read, not at all: the caller
    does it after, where it still wants it."""
    _WHILE_INFLATING.append(task)
    try:
        yield
    finally:
        if task in _WHILE_INFLATING:
            _WHILE_INFLATING.remove(task)


def before_forking() -> None:
    """What every forked process would otherwise load again on its own: numpy's masked arrays,
    which `np.unique`, `np.isin` and `np.median` import on their first call (46-74 ms in each
    of 15 forked parts on the lent 16-core machine), loaded once here."""
    import numpy.ma  # noqa: F401


def _fork_parts(
    ctx, buf: bytearray | mmap.mmap, ends: list[int], commas: list[int], children: list, filled: int
) -> None:
    """Fork a process for each part whose end boundary is now in `buf[:filled]` (`commas` gains
    the array's "[" once it is read, then each forked part's closing comma)."""
    before_forking()
    if not commas:
        start = _array_start(buf, filled)
        if start < 0:
            return  # the array has not begun yet
        commas.append(start)
    while len(commas) <= len(ends):
        comma = cut.first_cut(buf, max(commas[-1] + 1, ends[len(commas) - 1]), filled)
        if comma < 0:
            return  # the boundary is not read yet
        recv, send = ctx.Pipe(duplex=False)
        out = anonymous_file()
        proc = ctx.Process(target=_child, args=(send, out, buf, commas[-1] + 1, comma))
        proc.daemon = True
        try:
            proc.start()  # the child sees the text read so far, which holds its part
        except BaseException:
            os.close(out)
            raise
        send.close()
        children.append((proc, recv, out))
        commas.append(comma)


def _take_ready(children: list, received: dict) -> None:
    """The parts whose children have sent them, received now."""
    for k, child in enumerate(children):
        if k not in received and child[1].poll():
            received[k] = _receive_part(child)


def _receive_part(child: tuple):
    """A part's raw columns from its child (process, pipe, file); None when it failed."""
    size = _receive(child[1])
    if size is None:
        return None
    try:
        return read_pickled(child[2], size)
    except (OSError, ValueError, pickle.UnpicklingError):
        return None
    finally:
        os.ftruncate(child[2], 0)  # its memory freed now, not when the file is closed


def _receive(recv):
    try:
        return recv.recv()
    except (EOFError, OSError):
        return None


def map_files(function, paths: list, workers: int) -> list:
    """`function(path)` for every path, over a process pool when that can help."""
    if workers <= 1 or len(paths) <= 1 or not can_fork():
        return [function(p) for p in paths]
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(paths)), mp_context=ctx) as pool:
        return list(pool.map(function, paths))
