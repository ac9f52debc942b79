"""The collective shim: the right torch function per version, correct results, no warning."""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist

from tests.fusion._dist import run_world
from tpscope.fusion.ops import compat


def test_uses_the_new_names_where_torch_has_them():
    names = compat.collective_names()
    if hasattr(dist, "all_gather_single"):
        assert names == {
            "all_gather": "all_gather_single",
            "reduce_scatter": "reduce_scatter_single",
        }
    else:  # torch 2.11 on the GPU machine
        assert names == {
            "all_gather": "all_gather_into_tensor",
            "reduce_scatter": "reduce_scatter_tensor",
        }


def _collectives(rank: int, world: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecation warning would fail the rank
        x = torch.full((2, 3), float(rank + 1))
        out = torch.empty(2 * world, 3)
        compat.all_gather_single(out, x)
        expected = torch.cat([torch.full((2, 3), float(r + 1)) for r in range(world)])
        assert torch.equal(out, expected)
        z = torch.arange(world * 2 * 3, dtype=torch.float32).view(world * 2, 3) * (rank + 1)
        rs = torch.empty(2, 3)
        work = compat.reduce_scatter_single(rs, z, async_op=True)
        work.wait()
        factor = sum(r + 1 for r in range(world))
        base = torch.arange(world * 2 * 3, dtype=torch.float32).view(world * 2, 3)
        assert torch.equal(rs, factor * base[rank * 2 : (rank + 1) * 2])


def test_all_gather_and_reduce_scatter_world2():
    run_world(_collectives, 2)


def test_versions():
    assert compat.nccl_version() is None or compat.nccl_version().count(".") == 2
    ops = compat.symm_mem_ops()
    assert ops is None or all(callable(op) for op in ops)
