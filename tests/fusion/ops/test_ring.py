"""The ring schedules called directly (world 4): own shard first, peer rows first, every block
landing where plain torch puts it."""

from __future__ import annotations

import torch

from tests.fusion._dist import run_world
from tpscope.fusion.ops.ring import ag_ring, rs_ring


def _ring(rank: int, world: int) -> None:
    g = torch.Generator().manual_seed(7)
    x_full, w = torch.randn(world * 4, 5, generator=g), torch.randn(5, 2, generator=g)
    mine = slice(rank * 4, (rank + 1) * 4)
    ys = [torch.randn(world * 4, 5, generator=g) for _ in range(world)]
    total = sum(y.double() @ w.double() for y in ys)
    # 1, in between, and one row per transfer; tapered: pieces of 3 + 1 rows (AG), 1 + 3 (RS)
    for chunks, taper in ((1, False), (2, False), (4, False), (2, True), (4, True)):
        out, gathered = ag_ring(x_full[mine], w, None, world, rank, "t", True, chunks, taper)
        torch.testing.assert_close(out, x_full @ w, msg=f"AG ring chunks={chunks} taper={taper}")
        assert torch.equal(gathered, x_full)
        # each rank holds different y: the sum over ranks of y_r @ w, rows of this rank's block
        got = rs_ring(ys[rank], w, None, world, rank, "t", chunks, taper)
        torch.testing.assert_close(
            got.double(),
            total[mine],
            rtol=1e-5,
            atol=1e-5,
            msg=f"RS ring chunks={chunks} taper={taper}",
        )
    out, none = ag_ring(x_full[mine], w, None, world, rank, "t", False)
    assert none is None


def test_ring_world4():
    run_world(_ring, 4)


def _ring_all_gather_exchange(rank: int, world: int) -> None:
    """Two ranks swapping each piece by an all-gather: the same block sums as plain torch."""
    g = torch.Generator().manual_seed(9)
    w = torch.randn(5, 3, generator=g)
    ys = [torch.randn(world * 4, 5, generator=g) for _ in range(world)]
    total = sum(y.double() @ w.double() for y in ys)
    mine = slice(rank * 4, (rank + 1) * 4)
    for chunks, taper in ((1, False), (2, False), (4, False), (2, True)):
        got = rs_ring(ys[rank], w, None, world, rank, "t", chunks, taper, all_gather_exchange=True)
        torch.testing.assert_close(
            got.double(),
            total[mine],
            rtol=1e-5,
            atol=1e-5,
            msg=f"RS ring by all-gather chunks={chunks} taper={taper}",
        )


def test_ring_all_gather_exchange_world2():
    run_world(_ring_all_gather_exchange, 2)
