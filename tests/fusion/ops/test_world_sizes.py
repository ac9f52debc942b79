"""World sizes 4 and 8 on CPU (gloo): `tpscope run --nproc 4|8` writes a complete run folder that
`tpscope analyze` reads, and the fused ops equal plain torch at world size 8 (test_ops.py covers 2
and 4). Expected values: the world size asked for, and float64 `torch.matmul` of the full tensors."""

from __future__ import annotations

import gzip
import json
import subprocess

import pytest
import torch

from tests.fusion._cli import TINY_MODEL, tpscope
from tests.fusion._dist import run_world
from tpscope.fusion.ops import api as ops

# heads, ffn, vocab and the 32 tokens of a step divide over 8 ranks (4 tokens each); of two
# --heads, the last is taken
TINY = ["--device", "cpu", "--steps", "3", "--profile-steps", "1", *TINY_MODEL, "--heads", "8",
        "--timeout-s", "60"]  # fmt: skip


def _tpscope(*args: str) -> subprocess.CompletedProcess:
    return tpscope(*args, timeout=240)


@pytest.mark.parametrize(("world", "mode", "chunks"), [(4, "chunked", 2), (8, "ring", 1)])
def test_run_at_world_size(tmp_path, world, mode, chunks):
    out = tmp_path / f"tp{world}"
    done = _tpscope(
        "run",
        "--nproc",
        str(world),
        "--mode",
        mode,
        "--chunks",
        str(chunks),
        "--out",
        str(out),
        *TINY,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"tp={world} mode={mode}" in done.stdout and "step 3/3" in done.stdout
    traces = sorted(out.glob("rank*.pt.trace.json.gz"))
    assert len(traces) == world, sorted(p.name for p in out.iterdir())
    ranks = []
    for path in traces:
        with gzip.open(path, "rt") as fh:
            doc = json.load(fh)
        info = doc["distributedInfo"]
        assert info["world_size"] == world and info["backend"] == "gloo", info
        assert path.name.startswith(f"rank{info['rank']}."), (path.name, info["rank"])
        ranks.append(info["rank"])
        names = {e.get("name", "") for e in doc["traceEvents"]}
        assert "ProfilerStep#2" in names, sorted(n for n in names if n.startswith("ProfilerStep"))
        assert (
            "tpscope/block0.mlp.fc1/ag_gemm" in names and "tpscope/block0.mlp.fc2/gemm_rs" in names
        )
        assert any(n.startswith("gloo:") for n in names), "the collectives are in the trace"
    assert sorted(ranks) == list(range(world))
    manifest = json.loads((out / "tpscope_run.jsonc").read_text())
    assert manifest["tp"] == world and manifest["world_size"] == world and manifest["mode"] == mode
    assert manifest["backend"] == "gloo" and manifest["profiler"]["profiled_steps"] == [2]
    assert len(manifest["step_times_ms"]) == 3
    analyzed = _tpscope("analyze", str(out), "--json")
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    assert json.loads(analyzed.stdout)["ranks"] == list(range(world))


def _ops_at_8(rank: int, world: int, mode: str) -> None:
    rows_local, k, n = 4, 8, 6
    g = torch.Generator().manual_seed(8)  # the same full tensors on every rank
    x_full = torch.randn(world * rows_local, k, generator=g)
    w_full = torch.randn(k, world * n, generator=g)  # AG side: column blocks per rank
    y_full = torch.randn(world * rows_local, world * k, generator=g)
    w2_full = torch.randn(world * k, n, generator=g)  # RS side: row blocks per rank
    ag_ref = (x_full.double() @ w_full.double())[:, rank * n : (rank + 1) * n]
    rs_ref = (y_full.double() @ w2_full.double())[rank * rows_local : (rank + 1) * rows_local]
    x_shard = x_full[rank * rows_local : (rank + 1) * rows_local]
    w_local = w_full[:, rank * n : (rank + 1) * n]
    y_local = y_full[:, rank * k : (rank + 1) * k]
    w2_local = w2_full[rank * k : (rank + 1) * k]
    variants = {
        "none": [(1, True)],
        "chunked": [(1, True), (2, True), (4, True), (2, False)],
        "ring": [(1, True), (2, True)],
    }[mode]
    for chunks, own_first in variants:
        what = f"{mode} chunks={chunks} own_first={own_first} rank {rank}/{world}"
        out, gathered = ops.all_gather_matmul(
            x_shard, w_local, mode=mode, chunks=chunks, return_gathered=True, own_first=own_first
        )
        assert out.shape == (world * rows_local, n), what
        torch.testing.assert_close(
            out.double(), ag_ref, rtol=1e-5, atol=1e-5, msg=f"AG-GEMM {what}"
        )
        torch.testing.assert_close(gathered, x_full, rtol=0, atol=0, msg=f"gathered {what}")
        rs = ops.matmul_reduce_scatter(y_local, w2_local, mode=mode, chunks=chunks)
        assert rs.shape == (rows_local, n), what
        torch.testing.assert_close(rs.double(), rs_ref, rtol=1e-5, atol=1e-5, msg=f"GEMM-RS {what}")


@pytest.mark.parametrize("mode", ["none", "chunked", "ring"])  # symm_mem has no CPU path
def test_ops_equal_plain_matmul_at_world_8(mode):
    run_world(_ops_at_8, 8, mode)
