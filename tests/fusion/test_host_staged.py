"""Mode host_staged on CPU (gloo): its outputs and gradients against unfused, the shared file's
life (gone after a run and after a crash), its refusals, and its ranges in a profiler trace.
(On CUDA the same code copies on the copy engines and orders by stream memory operations:
benchmarks/host_staged_one_gpu.py checks it against unfused on the GPU machine.)"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tpscope.fusion import host_shm
from tpscope.fusion.config import FusionChoice
from tpscope.fusion.host_shm import PREFIX, SHM_DIR, ahead
from tpscope.fusion.layers import AllGatherMatmulFn, MatmulReduceScatterFn
from tpscope.fusion.ops import all_gather_matmul, matmul_reduce_scatter
from tpscope.fusion.validate import FusionShapeError, check_host_local, check_nodes

from ._dist import run_world, scratch_dir

REPO = Path(__file__).resolve().parents[2]
TOL = {"rtol": 1e-5, "atol": 1e-5}


def _ours() -> set[str]:
    return {n for n in os.listdir(SHM_DIR) if n.startswith(PREFIX)}


def _reference_ag(x_all: list[torch.Tensor], w: torch.Tensor) -> torch.Tensor:
    return torch.cat(x_all) @ w


def _ops_match(rank: int, world: int) -> None:
    """Forward of both sides at several chunk counts and uneven shapes (rows, K and N not powers
    of two), against the full product computed here from every rank's inputs."""
    for rows, k, n in ((6, 5, 7), (12, 3, 1), (9, 11, 4)):
        for chunks in (1, 2, 3, rows):
            if rows % chunks:
                continue
            gen = torch.Generator().manual_seed(1000 * rows + chunks)
            x_all = [torch.randn(rows, k, generator=gen) for _ in range(world)]
            w = torch.randn(k, n, generator=gen)
            out, gathered = all_gather_matmul(x_all[rank], w, mode="host_staged", chunks=chunks,
                                              return_gathered=True)
            torch.testing.assert_close(out, _reference_ag(x_all, w), **TOL)
            torch.testing.assert_close(gathered, torch.cat(x_all), rtol=0, atol=0)
            y_all = [torch.randn(world * rows, k, generator=gen) for _ in range(world)]
            w_all = [torch.randn(k, n, generator=gen) for _ in range(world)]
            full = sum(y @ wr for y, wr in zip(y_all, w_all))
            got = matmul_reduce_scatter(y_all[rank], w_all[rank], mode="host_staged", chunks=chunks)
            torch.testing.assert_close(got, full[rank * rows : (rank + 1) * rows], **TOL)
            lhs = torch.randn(world * rows, 2, generator=gen)
            out, grad_w = all_gather_matmul(x_all[rank], w, mode="host_staged", chunks=chunks, wgrad_lhs=lhs)
            torch.testing.assert_close(grad_w, lhs.t() @ torch.cat(x_all), **TOL)


@pytest.mark.parametrize("world", [2, 3])
def test_forward_equals_the_full_product(world):
    run_world(_ops_match, world)


def _grads(rank: int, world: int, out: str) -> None:
    """Forward and backward of both layer functions, host_staged against unfused (fp32)."""
    results = {}
    for chunks in (1, 2, 4):
        for bwd in (True, False):
            gen = torch.Generator().manual_seed(chunks + 10 * rank)
            x = torch.randn(8, 6, generator=gen)
            w_col = torch.randn(6, 5, generator=gen)
            y = torch.randn(8 * world, 3, generator=gen)
            w_row = torch.randn(3, 7, generator=gen)
            g_col = torch.randn(8 * world, 5, generator=gen)
            g_row = torch.randn(8, 7, generator=gen)
            got = {}
            for mode in ("none", "host_staged"):
                fusion = FusionChoice(mode=mode, chunks=chunks if mode != "none" else 1, bwd_overlap=bwd)
                leaves = [t.clone().requires_grad_() for t in (x, w_col, y, w_row)]
                a = AllGatherMatmulFn.apply(leaves[0], leaves[1], None, fusion, "t.col")
                b = MatmulReduceScatterFn.apply(leaves[2], leaves[3], None, fusion, "t.row")
                torch.autograd.backward([a, b], [g_col, g_row])
                got[mode] = [a.detach(), b.detach(), *(t.grad for t in leaves)]
            for ref, fused in zip(got["none"], got["host_staged"]):
                torch.testing.assert_close(fused, ref, **TOL)
            results[f"k{chunks}/bwd{bwd}"] = True
    if rank == 0:
        Path(out, "grads.json").write_text(json.dumps(results))


def test_backward_equals_unfused():
    out = scratch_dir()
    run_world(_grads, 2, out)
    assert len(json.loads(Path(out, "grads.json").read_text())) == 6


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
        torch.testing.assert_close(out_ag, _reference_ag(x_all, w), **TOL)
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
    from ._dist import _entry, _free_port

    port = _free_port()
    procs = [ctx.Process(target=_entry, args=(r, 2, port, _crash_before_peers_map, (out,))) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    error = Path(out, "error.txt").read_text()  # rank 0 failed in the hand-over, after making the file
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


def test_refusals_name_the_ranks():
    check_host_local(["a", "a"], ["cpu", "cpu"])
    with pytest.raises(FusionShapeError, match="one host.*rank 0 on a, rank 1 on b"):
        check_host_local(["a", "b"], ["cuda", "cuda"])
    with pytest.raises(FusionShapeError, match="same kind of device; rank 0 on cpu, rank 1 on cuda"):
        check_host_local(["a", "a"], ["cpu", "cuda"])
    check_nodes("host_staged", 1)
    check_nodes("chunked", 4)
    with pytest.raises(FusionShapeError, match="must be on one node, not 2"):
        check_nodes("host_staged", 2)


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


def _profiled(rank: int, world: int, out: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    x, w = torch.randn(4, 3), torch.randn(3, 5)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        all_gather_matmul(x, w, mode="host_staged", chunks=2, label="blk.fc1")
        matmul_reduce_scatter(torch.randn(8, 3), w, mode="host_staged", chunks=2, label="blk.fc2")
    if rank == 0:
        Path(out, "names.json").write_text(json.dumps(sorted({e.name for e in prof.events()})))


def test_the_trace_shows_the_mode_s_ranges():
    out = scratch_dir()
    run_world(_profiled, 2, out)
    names = set(json.loads(Path(out, "names.json").read_text()))
    want = {f"tpscope/blk.fc1/ag_gemm/{r}" for r in ("stage_out", "stage_in", "chunk0", "chunk1")}
    # GEMM-RS: pieces 0-1 are the peer's rows, 2-3 the own rows' GEMMs with the sum added in
    want |= {f"tpscope/blk.fc2/gemm_rs/{r}" for r in ("stage_out", "stage_in", "chunk0", "chunk1", "chunk2",
                                                       "chunk3")}
    assert want <= names, sorted(want - names)


def test_cpu_run_end_to_end(tmp_path):
    """`tpscope run --mode host_staged` on CPU: it trains, its manifest says the mode, and its
    traces hold the staging ranges."""
    import gzip

    out = tmp_path / "run"
    before = _ours()
    cmd = [sys.executable, "-m", "tpscope.cli", "run", "--device", "cpu", "--nproc", "2", "--mode", "host_staged",
           "--chunks", "2", "--steps", "4", "--profile-steps", "1", "--layers", "1", "--hidden", "32", "--ffn",
           "64", "--heads", "2", "--vocab", "32", "--seq-len", "16", "--batch", "2", "--out", str(out)]
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "tpscope_run.json").read_text())
    assert manifest["mode"] == "host_staged" and manifest["complete"]
    assert {v["mode"] for v in manifest["fusion_by_layer"].values()} == {"host_staged"}
    traces = sorted(out.glob("rank*.pt.trace.json.gz"))
    assert len(traces) == 2
    text = gzip.open(traces[0], "rt").read()
    assert "/ag_gemm/stage_in" in text and "/gemm_rs/stage_out" in text
    assert _ours() <= before


def test_across_nodes_the_run_is_refused_before_it_starts(tmp_path):
    out = tmp_path / "never"
    cmd = [sys.executable, "-m", "tpscope.cli", "run", "--device", "cpu", "--nproc", "1", "--mode", "host_staged",
           "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-backend", "c10d",
           "--rdzv-id", "x", "--steps", "4", "--out", str(out)]
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "must be on one node, not 2" in lines[0], done.stderr
    assert not out.exists()
