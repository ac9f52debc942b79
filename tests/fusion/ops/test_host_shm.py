"""The region of mode host_staged on CPU (gloo): the shared file is gone while the ranks use it,
after a run and after a crash in its hand-over; a stale file is removed; a full /dev/shm and a group
across hosts are refused in one line; the flags compare cyclically."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
from pathlib import Path

import pytest
import torch

from tests.fusion._dist import _entry, _free_port, run_world, scratch_dir
from tpscope.fusion.ops import host_shm
from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter
from tpscope.fusion.ops.host_shm import PREFIX, SHM_DIR, ahead
from tpscope.fusion.ops.validate import FusionShapeError

TOL = {"rtol": 1e-5, "atol": 1e-5}


def _ours() -> set[str]:
    return {n for n in os.listdir(SHM_DIR) if n.startswith(PREFIX)}


def _many_calls(rank: int, world: int, out: str) -> None:
    """Forty calls of both sides back to back with growing and shrinking shapes (the slots are
    reused in turn and the region is made again when it must grow), each checked; the file is
    unlinked as soon as every rank mapped it."""
    seen = []
    for i in range(40):
        rows = (2, 8, 4, 32)[i % 4]
        gen = torch.Generator().manual_seed(i)
        x_all = [torch.randn(rows, 4, generator=gen) for _ in range(world)]
        w = torch.randn(4, 3, generator=gen)
        out_ag = all_gather_matmul(x_all[rank], w, mode="host_staged", chunks=2)
        torch.testing.assert_close(out_ag, torch.cat(x_all) @ w, **TOL)
        y_all = [torch.randn(world * rows, 4, generator=gen) for _ in range(world)]
        got = matmul_reduce_scatter(y_all[rank], w, mode="host_staged", chunks=2)
        torch.testing.assert_close(got, (sum(y_all) @ w)[rank * rows : (rank + 1) * rows], **TOL)
        seen.append(sorted(_ours()))
    if rank == 0:
        Path(out, "seen.json").write_text(json.dumps(seen))


def test_back_to_back_calls_reuse_the_slots_and_leave_no_file():
    before = _ours()
    out = scratch_dir()
    run_world(_many_calls, 2, out)
    seen = json.loads(Path(out, "seen.json").read_text())
    assert len(seen) == 40 and all(set(s) <= before for s in seen)  # unlinked while in use
    assert _ours() <= before


def _crash_before_peers_map(rank: int, world: int, out: str) -> None:
    """Rank 1 dies in the first op's set-up, after the ranks met and rank 0 made the file, before
    its name is handed over."""
    if rank == 1:
        import torch.distributed as dist

        dist.broadcast_object_list = lambda *a, **k: os._exit(0)  # a forked rank: only this process
    try:
        all_gather_matmul(torch.ones(2, 2), torch.ones(2, 2), mode="host_staged", chunks=1)
    except Exception as exc:  # noqa: BLE001 - the failure itself is what is checked
        Path(out, "error.txt").write_text(f"{type(exc).__name__}: {exc}")
    os._exit(0)  # the group cannot be torn down cleanly with a dead peer


def test_a_crash_leaves_no_file():
    before = _ours()
    out = scratch_dir()
    ctx = multiprocessing.get_context("fork")
    port = _free_port()
    procs = [
        ctx.Process(target=_entry, args=(r, 2, port, _crash_before_peers_map, (out,)))
        for r in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    error = Path(
        out, "error.txt"
    ).read_text()  # rank 0 failed in the hand-over, after making the file
    assert _ours() <= before, error


def test_a_file_whose_creator_died_is_removed_by_the_next_creation(tmp_path):
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=lambda: (host_shm._create(str(tmp_path), 4096), os._exit(0)))
    child.start()
    child.join(30)
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(f"{PREFIX}-{child.pid}-")
    alive = tmp_path / f"{PREFIX}-{os.getpid()}-abc123"  # this process is alive: its file stays
    alive.write_bytes(b"")
    mine = host_shm._create(str(tmp_path), 4096)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, Path(mine).name])
    assert os.path.getsize(mine) == 4096


def test_a_full_shm_is_one_line(tmp_path, monkeypatch):
    def no_space(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(OSError) as err:
        host_shm._create(str(tmp_path), 1 << 30)
    assert "cannot reserve 1024 MiB" in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_flags_compare_cyclically():
    assert ahead(5, 5) and ahead(6, 5) and not ahead(4, 5)
    assert ahead(3, 2**32 - 2) and not ahead(2**32 - 2, 3)  # past the wrap


def _other_host(rank: int, world: int, out: str) -> None:
    if rank == 1:
        socket.gethostname = lambda: "elsewhere"  # a forked rank: only this process sees it
    try:
        matmul_reduce_scatter(torch.ones(4, 2), torch.ones(2, 2), mode="host_staged", chunks=1)
    except FusionShapeError as exc:
        Path(out, f"rank{rank}.txt").write_text(str(exc))


def test_a_group_across_hosts_is_refused_by_every_rank_alike():
    out = scratch_dir()
    run_world(_other_host, 2, out)
    lines = [Path(out, f"rank{r}.txt").read_text() for r in range(2)]
    assert lines[0] == lines[1] and "\n" not in lines[0]
    assert f"rank 0 on {socket.gethostname()}, rank 1 on elsewhere" in lines[0]


def _peer_stops(rank: int, world: int, out: str) -> None:
    """Rank 1 takes part in one call and not in the next: rank 0 gives up waiting for its pieces."""
    host_shm.WAIT_TIMEOUT_S = 1.0  # forked ranks: only these processes see it
    x = torch.ones(4, 2)
    all_gather_matmul(x, torch.ones(2, 2), mode="host_staged", chunks=1)
    if rank == 0:
        try:
            all_gather_matmul(x, torch.ones(2, 2), mode="host_staged", chunks=1)
        except RuntimeError as exc:
            Path(out, "error.txt").write_text(str(exc))
    import torch.distributed as dist

    dist.barrier()


def test_a_peer_that_stops_staging_is_one_line_after_the_timeout():
    from tpscope.fusion.run.worker import collective_failure

    out = scratch_dir()
    run_world(_peer_stops, 2, out)
    error = Path(out, "error.txt").read_text()
    assert "timed out after 1 s waiting for rank 1's piece 0" in error and "\n" not in error
    assert collective_failure(RuntimeError(error)).startswith(
        "a collective failed (mode host_staged: timed out"
    )


def _not_shared(rank: int, world: int, out: str) -> None:
    if rank == 1:  # as if this rank had another /dev/shm: the file rank 0 made is not there
        real_open = os.open
        os.open = lambda path, *a, **k: (
            (_ for _ in ()).throw(FileNotFoundError(path))
            if os.path.basename(str(path)).startswith(PREFIX)
            else real_open(path, *a, **k)
        )
    try:
        all_gather_matmul(torch.ones(2, 2), torch.ones(2, 2), mode="host_staged", chunks=1)
    except RuntimeError as exc:
        Path(out, f"rank{rank}.txt").write_text(str(exc))


def test_ranks_that_do_not_share_the_folder_are_refused_alike():
    before = _ours()
    out = scratch_dir()
    run_world(_not_shared, 2, out)
    lines = [Path(out, f"rank{r}.txt").read_text() for r in range(2)]
    assert lines[0] == lines[1] and "\n" not in lines[0]
    assert (
        lines[0].startswith("mode host_staged: set-up failed on rank 1: ")
        and "do not share one" in lines[0]
    )
    assert _ours() <= before


def _full_dev_shm(rank: int, world: int, out: str) -> None:
    real = os.posix_fallocate

    def no_room_in_dev_shm(fd, offset, length):  # as in a container whose /dev/shm is 64 MiB
        if os.readlink(f"/proc/self/fd/{fd}").startswith(SHM_DIR + "/"):
            raise OSError(28, "No space left on device")
        return real(fd, offset, length)

    os.posix_fallocate = no_room_in_dev_shm  # forked ranks: only these processes see it
    gen = torch.Generator().manual_seed(5)
    x_all = [torch.randn(6, 4, generator=gen) for _ in range(world)]
    w = torch.randn(4, 3, generator=gen)
    got = all_gather_matmul(x_all[rank], w, mode="host_staged", chunks=2)
    torch.testing.assert_close(got, torch.cat(x_all) @ w, **TOL)
    y_all = [torch.randn(12, 4, generator=gen) for _ in range(world)]
    got = matmul_reduce_scatter(y_all[rank], w, mode="host_staged", chunks=3)
    torch.testing.assert_close(got, (sum(y_all) @ w)[rank * 6 : (rank + 1) * 6], **TOL)
    paths = [r.path for r in host_shm._REGIONS.values()]
    if rank == 0:
        Path(out, "paths.json").write_text(
            json.dumps({"paths": paths, "held": list(host_shm._HELD)})
        )


def test_a_full_dev_shm_falls_back_to_anonymous_shared_memory():
    before = _ours()
    out = scratch_dir()
    run_world(_full_dev_shm, 2, out)
    seen = json.loads(Path(out, "paths.json").read_text())
    assert (
        len(seen["paths"]) == 1
        and seen["paths"][0].startswith("/proc/")
        and "/fd/" in seen["paths"][0]
    )
    assert seen["held"] == []  # the creator's descriptor closed once both ranks had mapped it
    assert _ours() <= before
