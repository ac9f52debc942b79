"""Independent pieces of one analysis over forked worker processes: each process is forked from
the analyzing one, so it reads the tables and graphs already built there (shared copy-on-write,
never sent), and only the pieces' results come back, each through its process's pipe as soon as
it is done. A worker leaves by `os._exit`: it tears down none of the objects it shares, which
would copy every page they touch."""

from __future__ import annotations

import ctypes
import gc
import mmap
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from multiprocessing.connection import wait

from tpscope.trace.read.parallel import (
    anonymous_file,
    before_forking,
    can_fork,
    read_pickled,
    write_bytes,
    write_pickled,
)


def map_forked(task: Callable[[int], object], n: int, workers: int) -> list:
    """[task(0), ..., task(n - 1)] in order, over `workers` processes (`Forked`)."""
    with Forked(task, n, workers) as forked:
        return forked.results()


class Forked:
    """`task(0)`, ..., `task(n - 1)` begun over `workers` processes when made: with more workers
    than tasks, one forked process per task; else this one and `workers - 1` forked ones, each
    taking every `workers`-th task, this one's share run in `results()`. So this process can do
    other work while the workers run, and then gather their results. All here where there is one
    worker, one task, or no safe fork (a thread running). A task's exception is raised by
    `results()`; leaving the `with` block before it ends the workers."""

    def __init__(self, task: Callable[[int], object], n: int, workers: int) -> None:
        self._task, self._n = task, n
        self._procs: list = []
        self._pipes: list = []
        self._done: dict[int, object] = {}
        self._frozen = False
        if workers <= 1 or n <= 1 or not can_fork():
            self._here = range(n)
            return
        slots = min(workers, n)
        self._here = range(0, n, slots) if workers <= n else range(0)  # this process's share
        gc.freeze()  # the objects built so far: a worker's collections never touch (copy) them
        self._frozen = True
        try:
            for j in range(1 if len(self._here) else 0, slots):
                recv, send = multiprocessing.Pipe(duplex=False)
                pid = _fork()
                if pid == 0:
                    recv.close()
                    _worker(send, task, range(j, n, slots))
                send.close()
                self._procs.append(pid)
                self._pipes.append(recv)
        except BaseException:
            self.close()
            raise

    def results(self) -> list:
        """Every task's result in order: this process's share run now, the workers' gathered."""
        self._done.update((k, self._task(k)) for k in self._here)
        while self._pipes:
            for recv in wait(self._pipes):
                try:
                    message = recv.recv()
                except EOFError:
                    raise RuntimeError("a forked worker ended without its results") from None
                if message is None:  # that worker's tasks are all sent
                    self._pipes.remove(recv)
                    recv.close()
                    continue
                k, ok, result = message
                if not ok:
                    raise RuntimeError(f"a forked worker failed: {result}")
                self._done[k] = result
        return [self._done[k] for k in range(self._n)]

    def close(self) -> None:
        """The workers ended (killed where their results are not all in) and reaped."""
        for pid in self._procs:  # killed where an error came, or results were never asked for
            _reap(pid, kill=len(self._done) < self._n)
        self._procs = []
        for recv in self._pipes:
            recv.close()
        self._pipes = []
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _fork() -> int:
    """`os.fork()` for a worker (not a multiprocessing.Process: a worker may fork its own), after
    what each process would otherwise do again (`before_forking`) and with nothing buffered to
    write twice; the worker dies with this process (`_die_with`)."""
    before_forking()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _die_with(parent)
    return pid


def _reap(pid: int, kill: bool) -> None:
    """Process `pid` waited for, killed first with `kill` (gone already: nothing to kill)."""
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.waitpid(pid, 0)


def _die_with(parent: int) -> None:
    """On Linux, this forked process killed when `parent` ends (`PR_SET_PDEATHSIG`), so that an
    analysis killed while its workers run leaves none running; it ends now if `parent` already
    has."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # it ended before the line above
            os._exit(1)


def _worker(send, task: Callable[[int], object], ks: range) -> None:
    """A forked worker's body: each task's result sent when done, then None; never returns."""
    try:
        for k in ks:
            try:
                send.send((k, True, task(k)))
            except Exception as exc:  # noqa: BLE001 - raised again in the parent, named
                send.send((k, False, f"{type(exc).__name__}: {exc}"))
                break
        send.send(None)
    finally:
        os._exit(0)


class ForkedCall:
    """`task()` begun in a forked process when made, so that this one goes on with its own work;
    `result()` waits for it and takes its value, pickled by the process into a file in memory
    (`anonymous_file`), never through a pipe. Where no fork is safe (a thread running), `task()`
    runs here in `result()`. A task's exception is raised by `result()`; `close()` before it ends
    the process."""

    def __init__(self, task: Callable[[], object]) -> None:
        self._task = task
        self._pid: int | None = None
        self._fd: int | None = None
        if not can_fork():
            return
        self._fd = anonymous_file()
        try:
            pid = _fork()
        except BaseException:
            self.close()
            raise
        if pid == 0:
            _call_and_exit(self._fd, task)
        self._pid = pid

    def done(self) -> bool:
        """Whether the process has ended (reaped now if so); True where the task runs here."""
        if self._pid is None:
            return True
        pid, _ = os.waitpid(self._pid, os.WNOHANG)
        if pid == 0:
            return False
        self._pid = None
        return True

    def result(self):
        if self._fd is None:  # nothing forked, or already taken
            return self._task()
        if self._pid is not None:
            _reap(self._pid, kill=False)
            self._pid = None
        try:
            size = os.fstat(self._fd).st_size
            if size == 0:
                raise RuntimeError("a forked worker ended without its result")
            ok, value = read_pickled(self._fd, size)
        finally:
            self.close()
        if not ok:
            raise RuntimeError(f"a forked worker failed: {value}")
        return value

    def close(self) -> None:
        """The process ended (killed if still running) and reaped, its file closed."""
        if self._pid is not None:
            _reap(self._pid, kill=True)
            self._pid = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _call_and_exit(fd: int, task: Callable[[], object]) -> None:
    """A `ForkedCall`'s process: `(True, task())`, or `(False, what failed)`, pickled into `fd`;
    never returns. Its collector stays off: a short task's garbage is dropped with the process,
    and a collection would touch (copy) every object it shares with its parent."""
    gc.disable()
    try:
        try:
            value = (True, task())
        except Exception as exc:  # noqa: BLE001 - raised again in the parent, named
            value = (False, f"{type(exc).__name__}: {exc}")
        write_pickled(fd, value)
    finally:
        os._exit(0)


class SharedTexts:
    """Slots of text that forked processes write into memory this process reads back, so that a
    long text (a path's segments as JSON) never passes through a pipe: one anonymous file per
    slot (`memfd`), made here before forking, so that every process forked after shares it.
    Each slot is written once, by one process (`write`), and read once here after (`read`)."""

    def __init__(self, slots: int) -> None:
        self._fds = [anonymous_file() for _ in range(slots)]

    def write(self, slot: int, text: str) -> None:
        write_bytes(self._fds[slot], text.encode("utf-8"))

    def read(self, slot: int) -> str:
        """The text written in `slot` ("" where none was), once: its memory is freed."""
        fd = self._fds[slot]
        size = os.fstat(fd).st_size
        if size == 0:
            return ""
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped:
            text = str(mapped, "utf-8")
        os.ftruncate(fd, 0)
        return text

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def __enter__(self) -> SharedTexts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
