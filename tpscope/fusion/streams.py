"""Where collectives, and GEMMs that may overlap other GEMMs, are issued: side streams on CUDA,
nothing on CPU.

NCCL runs a collective on its own stream, which first waits for the stream that issued it. Issued
from the compute stream, a chunk's collective would wait for every GEMM launched before it; issued
from a side stream that waited only for the inputs, it runs beside them. A GEMM issued on a second
side stream (role `gemm`) may start its blocks while the GEMM before it on the compute stream
drains its last, partly empty wave of tiles (tpscope.fusion.copy_engine). On CPU (gloo) there are
no streams: these helpers do nothing and the same code runs, so CI tests it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_SIDE: dict[tuple[int, str], torch.cuda.Stream] = {}

SIDE_STREAM_PRIORITY = {"comm": -1, "gemm": -1}
"""Priority of each side stream by role (lower is higher on CUDA; the compute stream has 0).
`comm`: a collective's kernel is not queued behind a chunk's GEMM blocks. `gemm`: the blocks of
a GEMM on it are scheduled before the compute stream's still-waiting ones, whose GEMM then fills
the last wave."""


class CommStream:
    """A side stream (one per device and role) of one op call on `device`, or a no-op for CPU
    tensors."""

    __slots__ = ("_side", "_main")

    def __init__(self, device: torch.device, role: str = "comm") -> None:
        if role not in SIDE_STREAM_PRIORITY:
            raise ValueError(f"stream role must be one of {', '.join(SIDE_STREAM_PRIORITY)}, not {role!r}")
        if device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            if (index, role) not in _SIDE:
                _SIDE[index, role] = torch.cuda.Stream(device=index, priority=SIDE_STREAM_PRIORITY[role])
            self._side = _SIDE[index, role]
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

    def follow(self, other: CommStream) -> None:
        """This side stream waits for all work queued so far on another side stream."""
        if self._side is not None:
            self._side.wait_stream(other._side)

    def waits(self, event) -> None:
        """The side stream waits for an event recorded on another side stream (no-op on CPU)."""
        if event is not None and self._side is not None:
            self._side.wait_event(event)

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
