"""On CPU the communication stream is a no-op, so the same op code runs under gloo."""

from __future__ import annotations

import torch

from tpscope.fusion.ops.streams import CommStream, wait_all


class _Work:
    def __init__(self) -> None:
        self.waited = False

    def wait(self) -> None:
        self.waited = True


def test_cpu_comm_stream_does_nothing_but_wait():
    comm = CommStream(torch.device("cpu"))
    comm.follow_compute()
    with comm.issue():
        pass
    works = [_Work(), _Work()]
    wait_all(works, comm)
    assert all(w.waited for w in works)
