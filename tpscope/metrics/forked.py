"""Independent pieces of one analysis over forked worker processes: each process is forked from
the analyzing one, so it reads the tables and graphs already built there (shared copy-on-write,
never sent), and only the pieces' results come back through a pipe."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from tpscope.trace.read.parallel import can_fork

_TASK: Callable | None = None  # the task the forked workers run (set only while they run)


def _run(k: int):
    return _TASK(k)


def map_forked(task: Callable[[int], object], n: int, workers: int) -> list:
    """[task(0), ..., task(n - 1)] in order, over `workers` forked processes (at most `n`); in
    this process where there is one worker, one task, or no safe fork (a thread running)."""
    global _TASK
    if workers <= 1 or n <= 1 or not can_fork():
        return [task(k) for k in range(n)]
    _TASK = task
    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=min(workers, n), mp_context=ctx) as pool:
            return list(pool.map(_run, range(n)))
    finally:
        _TASK = None
