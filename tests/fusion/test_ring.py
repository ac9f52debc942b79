"""The ring schedules called directly (world 4): own shard first, peer rows first, every block
landing where plain torch puts it."""

from __future__ import annotations

import torch

from tpscope.fusion.ring import ag_ring, rs_ring

from ._dist import run_world


def _ring(rank: int, world: int) -> None:
    g = torch.Generator().manual_seed(7)
    x_full, w = torch.randn(world * 3, 5, generator=g), torch.randn(5, 2, generator=g)
    out, gathered = ag_ring(x_full[rank * 3 : (rank + 1) * 3], w, None, world, rank, "t", True)
    torch.testing.assert_close(out, x_full @ w)
    assert torch.equal(gathered, x_full)
    out, none = ag_ring(x_full[rank * 3 : (rank + 1) * 3], w, None, world, rank, "t", False)
    assert none is None
    # each rank holds different y; the sum over ranks of y_r @ w, rows of this rank's block
    ys = [torch.randn(world * 3, 5, generator=g) for _ in range(world)]
    got = rs_ring(ys[rank], w, None, world, rank, "t")
    total = sum(y.double() @ w.double() for y in ys)
    torch.testing.assert_close(got.double(), total[rank * 3 : (rank + 1) * 3], rtol=1e-5, atol=1e-5)


def test_ring_world4():
    run_world(_ring, 4)
