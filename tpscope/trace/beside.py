"""Two pieces of array work at once: one in a thread of its own while the caller does the other.

numpy lets go of Python's lock inside its loops over big arrays (sorts, searches, ufuncs), so two
threads that spend their time there run on two cores. The analyzer uses it where it is given
several workers and one process holds the data: after a big file is read (its tables assembled,
its CPU ops cut) and while a rank's graph for the critical path is built (docs/benchmarks.md
gives the measurements). With one worker everything runs in the caller, in order.

The thread has ended when `at_once` returns, so a process forked afterwards has no thread of
ours running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


def threads_for(workers: int) -> int:
    """The threads a stage given `workers` passes to `at_once`: two where there are several."""
    return min(workers, 2)


def at_once(here: Callable[[], A], beside: Callable[[], B], threads: int) -> tuple[A, B]:
    """`(here(), beside())`: with `threads` > 1 `beside` runs in a thread of its own while the
    caller runs `here`; else `here` then `beside`. An exception of either is raised here (the
    caller's first), after the thread has ended."""
    if threads <= 1:
        return here(), beside()
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = beside()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="tpscope-beside", daemon=True)
    thread.start()
    try:
        value = here()
    finally:
        thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return value, box["value"]  # type: ignore[return-value]
