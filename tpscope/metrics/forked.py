"""Independent pieces of one analysis over forked worker processes: each process is forked from
the analyzing one, so it reads the tables and graphs already built there (shared copy-on-write,
never sent), and only the pieces' results come back, each through its process's pipe as soon as
it is done. A worker leaves by `os._exit`: it tears down none of the objects it shares, which
would copy every page they touch."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from collections.abc import Callable
from multiprocessing.connection import wait

from tpscope.trace.read.parallel import before_forking, can_fork


def map_forked(task: Callable[[int], object], n: int, workers: int) -> list:
    """[task(0), ..., task(n - 1)] in order, over `workers` processes: with more workers than
    tasks, one forked process per task (this one only receives their results); else this one and
    `workers - 1` forked ones, each taking every `workers`-th task. All here where there is one
    worker, one task, or no safe fork (a thread running). A task's exception is raised here."""
    if workers <= 1 or n <= 1 or not can_fork():
        return [task(k) for k in range(n)]
    slots = min(workers, n)
    here = range(0, n, slots) if workers <= n else range(0)  # this process's share
    before_forking()
    gc.freeze()  # the objects built so far: a worker's collections never touch (copy) them
    for stream in (sys.stdout, sys.stderr):  # text still buffered would be written by each worker
        stream.flush()
    ctx = multiprocessing.get_context("fork")
    procs, pipes = [], []
    done: dict[int, object] = {}
    try:
        for j in range(1 if len(here) else 0, slots):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(send, task, range(j, n, slots)), daemon=True)
            proc.start()
            send.close()
            procs.append(proc)
            pipes.append(recv)
        done.update((k, task(k)) for k in here)
        while pipes:
            for recv in wait(pipes):
                try:
                    message = recv.recv()
                except EOFError:
                    raise RuntimeError("a forked worker ended without its results") from None
                if message is None:  # that worker's tasks are all sent
                    pipes.remove(recv)
                    continue
                k, ok, result = message
                if not ok:
                    raise RuntimeError(f"a forked worker failed: {result}")
                done[k] = result
    finally:
        for proc in procs:
            if len(done) < n:  # an error: the rest is not wanted
                proc.kill()
            proc.join()
        gc.unfreeze()
    return [done[k] for k in range(n)]


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
