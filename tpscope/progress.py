"""Progress on the terminal for steps that can take seconds (reading traces, analyzing, comparing).

Drawn by rich on stderr, only when stderr is a terminal, so pipes, files and CI logs get nothing
extra and stdout stays the command's output.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def working(what: str) -> Iterator[None]:
    """A spinner saying `what` while the block runs (nothing when stderr is not a terminal)."""
    try:
        from rich.console import Console
    except ImportError:  # a machine with torch alone (tpscope run and sweep need nothing more)
        Console = None
    if Console is None or not sys.stderr.isatty():
        yield
        return

    with Console(stderr=True).status(what):
        yield
