"""Spawned gloo worlds for the fusion tests: each test runs a function on every rank and fails
with the rank's traceback if any rank raises. Timeouts keep a broken rank from hanging the rest."""

from __future__ import annotations

import datetime
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

GLOO_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, world: int, port: int, fn, args) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=GLOO_TIMEOUT_S),
    )
    try:
        fn(rank, world, *args)
        # No rank leaves while another is still inside a collective or connecting a group
        # (gloo's connectFullMesh fails "closed by peer" when the peer exits first).
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_world(fn, world: int, *args) -> None:
    """Run `fn(rank, world, *args)` on `world` processes (gloo, CPU). They are forked: a child
    inherits the imported torch instead of importing it again, which on a 2-core CI machine is
    most of a spawned world's cost. A rank that raises fails the test with its traceback."""
    mp.start_processes(
        _entry, args=(world, _free_port(), fn, args), nprocs=world, join=True, start_method="fork"
    )


def scratch_dir() -> str:
    """A fresh folder for files that ranks hand back to the test."""
    return tempfile.mkdtemp(prefix="tpscope-test-")
