"""Where collectives are issued: a side stream on CUDA, nothing on CPU.

NCCL runs a collective on its own stream, which first waits for the stream that issued it. Issued
from the compute stream, a chunk's collective would wait for every GEMM launched before it; issued
from a side stream that waited only for the inputs, it runs beside them. On CPU (gloo) there are
no streams: these helpers do nothing and the same code runs, so CI tests it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_SIDE: dict[int, torch.cuda.Stream] = {}

SIDE_STREAM_PRIORITY = -1
"""Priority of the communication stream (lower is higher on CUDA): a collective's kernel is not
queued behind a chunk's GEMM blocks."""


class CommStream:
    """The side stream of one op call on `device`, or a no-op for CPU tensors."""

    __slots__ = ("_side", "_main")

    def __init__(self, device: torch.device) -> None:
        if device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            if index not in _SIDE:
                _SIDE[index] = torch.cuda.Stream(device=index, priority=SIDE_STREAM_PRIORITY)
            self._side = _SIDE[index]
            self._main = torch.cuda.current_stream(index)
        else:
            self._side = None
            self._main = None

    def follow_compute(self) -> None:
        """The side stream waits for all work queued so far on the compute stream."""
        if self._side is not None:
            self._side.wait_stream(self._main)

    @contextlib.contextmanager
    def issue(self) -> Iterator[None]:
        """Issue collectives (and wait on their works) on the side stream."""
        if self._side is None:
            yield
        else:
            with torch.cuda.stream(self._side):
                yield

    def record(self):
        """An event at the current end of the side stream (None on CPU)."""
        if self._side is None:
            return None
        event = torch.cuda.Event()
        event.record(self._side)
        return event

    def compute_waits(self, event) -> None:
        """The compute stream waits for an event from `record` (no-op on CPU)."""
        if event is not None:
            self._main.wait_event(event)

    def join(self) -> None:
        """The compute stream waits for all work queued so far on the side stream."""
        if self._side is not None:
            self._main.wait_stream(self._side)


def wait_all(works: list, comm: CommStream) -> None:
    """Wait on collective works from the side stream, then let the compute stream follow it."""
    with comm.issue():
        for work in works:
            work.wait()
    comm.join()
