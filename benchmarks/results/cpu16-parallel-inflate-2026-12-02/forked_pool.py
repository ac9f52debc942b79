"""Independent pieces of one analysis over forked worker processes: each process is forked from
the analyzing one, so it reads the tables and graphs already built there (shared copy-on-write,
never sent), and only the pieces' results come back through a pipe."""

from __future__ import annotations

import gc
import multiprocessing
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from tpscope.trace.read.parallel import can_fork

_TASK: Callable | None = None  # the task the forked workers run (set only while they run)


def _run(k: int):
    return _TASK(k)


def map_forked(task: Callable[[int], object], n: int, workers: int) -> list:
    """[task(0), ..., task(n - 1)] in order, over `workers` processes: with more workers than
    tasks, one forked process per task (this one only receives their results); else this one and
    `workers - 1` forked ones, this one taking every `workers`-th task (a task it runs sends
    nothing). All here where there is one worker, one task, or no safe fork (a thread running)."""
    global _TASK
    if workers <= 1 or n <= 1 or not can_fork():
        return [task(k) for k in range(n)]
    forked = min(workers - 1, n) if workers <= n else n
    mine = range(forked, n, forked + 1) if forked < n else range(0)
    _TASK = task
    gc.freeze()  # the objects built so far: a worker's collections never touch (copy) them
    for stream in (sys.stdout, sys.stderr):  # text still buffered would be written by each worker
        stream.flush()
    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=forked, mp_context=ctx) as pool:
            theirs = {k: pool.submit(_run, k) for k in range(n) if k not in mine}
            done = {k: task(k) for k in mine}
            done.update((k, f.result()) for k, f in theirs.items())
    finally:
        _TASK = None
        gc.unfreeze()
    return [done[k] for k in range(n)]
