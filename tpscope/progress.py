"""Progress on the terminal for steps that can take seconds (reading traces, analyzing, comparing).

Written on stderr, only when stderr is a terminal, so pipes, files and CI logs get nothing
extra and stdout stays the command's output.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def working(what: str) -> Iterator[None]:
    """`what` on a terminal's stderr while the block runs, erased when it ends (nothing when stderr
    is not a terminal). No spinner thread: the readers and the critical path fork worker processes,
    which is safe only from a process that runs one thread."""
    err = sys.stderr
    if not err.isatty():
        yield
        return
    line = "".join(c if c.isprintable() else "?" for c in what) + " ..."
    err.write(line)
    err.flush()
    try:
        yield
    finally:
        err.write("\r" + " " * len(line) + "\r")
        err.flush()
