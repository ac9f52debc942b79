"""Mode host_staged on CPU (gloo): its outputs and gradients against unfused, its ranges in a
profiler trace, a real CPU run, and its refusal across nodes (its region: test_host_shm.py).
(On CUDA the same code copies on the copy engines and orders by stream memory operations:
benchmarks/host_staged_one_gpu.py checks it against unfused on the GPU machine.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from tests.fusion._cli import TINY_MODEL, tpscope
from tests.fusion._dist import run_world, scratch_dir
from tpscope.fusion.model.layers import AllGatherMatmulFn, MatmulReduceScatterFn
from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter
from tpscope.fusion.ops.host_shm import PREFIX, SHM_DIR
from tpscope.runfolder.fusion_choice import FusionChoice

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
            out, gathered = all_gather_matmul(
                x_all[rank], w, mode="host_staged", chunks=chunks, return_gathered=True
            )
            torch.testing.assert_close(out, _reference_ag(x_all, w), **TOL)
            torch.testing.assert_close(gathered, torch.cat(x_all), rtol=0, atol=0)
            y_all = [torch.randn(world * rows, k, generator=gen) for _ in range(world)]
            w_all = [torch.randn(k, n, generator=gen) for _ in range(world)]
            full = sum(y @ wr for y, wr in zip(y_all, w_all))
            got = matmul_reduce_scatter(y_all[rank], w_all[rank], mode="host_staged", chunks=chunks)
            torch.testing.assert_close(got, full[rank * rows : (rank + 1) * rows], **TOL)
            lhs = torch.randn(world * rows, 2, generator=gen)
            out, grad_w = all_gather_matmul(
                x_all[rank], w, mode="host_staged", chunks=chunks, wgrad_lhs=lhs
            )
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
                fusion = FusionChoice(
                    mode=mode, chunks=chunks if mode != "none" else 1, bwd_overlap=bwd
                )
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
    want |= {
        f"tpscope/blk.fc2/gemm_rs/{r}"
        for r in ("stage_out", "stage_in", "chunk0", "chunk1", "chunk2", "chunk3")
    }
    assert want <= names, sorted(want - names)


def test_cpu_run_end_to_end(tmp_path):
    """`tpscope run --mode host_staged` on CPU: it trains, its manifest says the mode, and its
    traces hold the staging ranges."""
    import gzip

    out = tmp_path / "run"
    before = _ours()
    done = tpscope(
        "run", "--device", "cpu", "--nproc", "2", "--mode", "host_staged", "--chunks", "2",
        "--steps", "4", "--profile-steps", "1", *TINY_MODEL, "--out", str(out),
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "tpscope_run.jsonc").read_text())
    assert manifest["mode"] == "host_staged" and manifest["complete"]
    assert {v["mode"] for v in manifest["fusion_by_layer"].values()} == {"host_staged"}
    traces = sorted(out.glob("rank*.pt.trace.json.gz"))
    assert len(traces) == 2
    text = gzip.open(traces[0], "rt").read()
    assert "/ag_gemm/stage_in" in text and "/gemm_rs/stage_out" in text
    assert _ours() <= before


def test_across_nodes_the_run_is_refused_before_it_starts(tmp_path):
    out = tmp_path / "never"
    done = tpscope(
        "run", "--device", "cpu", "--nproc", "1", "--mode", "host_staged", "--nnodes", "2",
        "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-backend", "c10d",
        "--rdzv-id", "x", "--steps", "4", "--out", str(out),
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "must be on one node, not 2" in lines[0], done.stderr
    assert not out.exists()


def test_a_slot_is_reused_only_after_every_peer_read_it(tmp_path, monkeypatch):
    """The rule the CPU runs cannot break by themselves (a rank there cannot get two calls ahead):
    before writing slot `call % 2`, every peer has posted `done >= call - 2`."""
    from tpscope.fusion.ops import host_shm, host_staged

    monkeypatch.setattr(host_shm, "WAIT_TIMEOUT_S", 0.05)
    path = host_shm._create(
        str(tmp_path), host_shm._round_up(3 * 2 * host_shm.FLAG_LINE) + 2 * 3 * 4096
    )
    reg = host_shm.Region(path, 3, 0, 4096, torch.device("cpu"))
    host_staged._wait_slot_free(reg, 1)  # the first two calls write fresh slots
    host_staged._wait_slot_free(reg, 2)
    reg.post(reg.done(1), 3)
    reg.post(reg.done(2), 4)
    host_staged._wait_slot_free(reg, 5)  # both peers have read call 3
    with pytest.raises(RuntimeError, match="waiting for rank 1 to read call 4's pieces"):
        host_staged._wait_slot_free(reg, 6)
    reg.close()


def _spy(rank: int, world: int, out: str) -> None:
    from tpscope.fusion.ops import host_staged

    calls = []
    real = host_staged._wait_slot_free
    host_staged._wait_slot_free = lambda reg, call: (calls.append(call), real(reg, call))[1]
    for _ in range(2):
        all_gather_matmul(torch.ones(4, 2), torch.ones(2, 3), mode="host_staged", chunks=2)
        matmul_reduce_scatter(torch.ones(8, 2), torch.ones(2, 3), mode="host_staged", chunks=2)
    if rank == 0:
        Path(out, "calls.json").write_text(json.dumps(calls))


def test_every_call_checks_its_slot_once_before_staging():
    out = scratch_dir()
    run_world(_spy, 2, out)
    assert json.loads(Path(out, "calls.json").read_text()) == [1, 2, 3, 4]


def test_a_region_that_cannot_be_made_ends_the_run_in_one_line(tmp_path):
    out = tmp_path / "run"
    done = tpscope(
        "run", "--device", "cpu", "--nproc", "2", "--mode", "host_staged", "--steps", "4",
        "--profile-steps", "0", *TINY_MODEL, "--out", str(out),
        env={"TPSCOPE_SHM_DIR": str(tmp_path / "missing")},
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    lines = set(done.stderr.strip().splitlines())  # each rank says it, alike
    assert lines == {
        f"tpscope run: error: mode host_staged: cannot create a file in {tmp_path / 'missing'} "
        "(No such file or directory); set TPSCOPE_SHM_DIR to a folder that every rank of the host "
        "shares"
    }, done.stderr[-3000:]
