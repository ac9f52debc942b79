"""The fused ops against plain torch on the full tensors, in spawned gloo worlds of 2 and 4.

Expected values come from `torch.matmul` on the whole (unsharded) tensors, never from the ops.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from tests.fusion._dist import run_world
from tpscope.fusion.ops import api as ops
from tpscope.fusion.ops import compat
from tpscope.fusion.ops.validate import FusionShapeError


def _close(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    """float32: tight; bfloat16: loose, scaled by the reference's magnitude (partial sums are
    rounded to bfloat16 before they are reduced)."""
    if dtype == torch.float32:
        torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5, msg=what)
    else:
        scale = float(ref.abs().max())
        torch.testing.assert_close(got.double(), ref, rtol=2e-2, atol=2e-2 * scale, msg=what)


def _variants(local_rows: int) -> list[tuple[str, int, bool, bool]]:
    # (mode, chunks, own_first, taper): chunks of 1 and of the largest legal value (one row per
    # chunk); tapered (uneven) pieces at 2 chunks (3 + 1 rows) and at one row per chunk
    return [
        ("none", 1, True, False),
        ("chunked", 1, True, False),
        ("chunked", 2, True, False),
        ("chunked", local_rows, True, False),
        ("chunked", 1, False, False),
        ("chunked", local_rows, False, False),
        ("ring", 1, True, False),
        ("ring", local_rows, True, False),
        ("chunked", 2, True, True),
        ("chunked", 2, False, True),
        ("chunked", local_rows, True, True),
        ("ring", 2, True, True),
    ]


def _check_modes(rank: int, world: int) -> None:
    rows_local, k, n = 4, 8, 6
    for dtype in (torch.float32, torch.bfloat16):
        for trial in range(2):  # fresh random inputs, the same on every rank
            g = torch.Generator().manual_seed(100 * trial + 1)
            x_full = torch.randn(world * rows_local, k, generator=g)
            w_full = torch.randn(k, world * n, generator=g)  # column blocks per rank
            y_full = torch.randn(world * rows_local, world * k, generator=g)
            w2_full = torch.randn(world * k, n, generator=g)  # row blocks per rank
            # independent references: float64 matmul of the full tensors (rounded to dtype first)
            ag_ref = (x_full.to(dtype).double() @ w_full.to(dtype).double())[
                :, rank * n : (rank + 1) * n
            ]
            rs_ref = (y_full.to(dtype).double() @ w2_full.to(dtype).double())[
                rank * rows_local : (rank + 1) * rows_local
            ]
            x_shard = x_full[rank * rows_local : (rank + 1) * rows_local].to(dtype)
            w_local = w_full[:, rank * n : (rank + 1) * n].to(dtype)
            y_local = y_full[:, rank * k : (rank + 1) * k].to(dtype)
            w2_local = w2_full[rank * k : (rank + 1) * k].to(dtype)
            for mode, chunks, own_first, taper in _variants(rows_local):
                what = (
                    f"{mode} k={chunks} own_first={own_first} taper={taper} {dtype} world {world}"
                )
                out, gathered = ops.all_gather_matmul(
                    x_shard,
                    w_local,
                    mode=mode,
                    chunks=chunks,
                    return_gathered=True,
                    own_first=own_first,
                    taper=taper,
                )
                assert out.shape == (world * rows_local, n) and out.dtype == dtype
                _close(out, ag_ref, dtype, f"AG-GEMM {what}")
                torch.testing.assert_close(gathered, x_full.to(dtype), rtol=0, atol=0, msg=what)
                rs = ops.matmul_reduce_scatter(
                    y_local, w2_local, mode=mode, chunks=chunks, taper=taper
                )
                assert rs.shape == (rows_local, n)
                _close(rs, rs_ref, dtype, f"GEMM-RS {what}")


def _check_refusals(rank: int, world: int) -> None:
    """Bad shapes fail before any collective: count collective calls, and call on one rank only
    (a collective there would block until the gloo timeout)."""
    calls = []
    real = (compat._ALL_GATHER, compat._REDUCE_SCATTER, dist.batch_isend_irecv)
    compat._ALL_GATHER = lambda *a, **k: calls.append("ag") or real[0](*a, **k)
    compat._REDUCE_SCATTER = lambda *a, **k: calls.append("rs") or real[1](*a, **k)
    try:
        if rank == 0:
            t0 = time.monotonic()
            bad = [
                lambda: ops.all_gather_matmul(
                    torch.zeros(6, 4), torch.zeros(4, 2), mode="chunked", chunks=4
                ),
                lambda: ops.all_gather_matmul(torch.zeros(6, 4), torch.zeros(5, 2), mode="none"),
                lambda: (
                    ops.matmul_reduce_scatter(
                        torch.zeros(6, 4), torch.zeros(4, 2), mode="chunked", chunks=4
                    )
                    if world == 2
                    else ops.matmul_reduce_scatter(
                        torch.zeros(6, 4), torch.zeros(4, 2), mode="ring"
                    )
                ),
                lambda: ops.all_gather_matmul(
                    torch.zeros(4, 4), torch.zeros(4, 2), mode="symm_mem"
                ),
                lambda: ops.matmul_reduce_scatter(
                    torch.zeros(8, 4), torch.zeros(4, 2), mode="symm_mem"
                ),
            ]
            for call in bad:
                with pytest.raises(FusionShapeError):
                    call()
            assert calls == [], calls
            assert time.monotonic() - t0 < 5
        dist.barrier()
    finally:
        compat._ALL_GATHER, compat._REDUCE_SCATTER = real[0], real[1]


def _check_labels(rank: int, world: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        ops.all_gather_matmul(
            torch.ones(4, 2), torch.ones(2, 3), mode="chunked", chunks=2, label="L0.fc1"
        )
        ops.matmul_reduce_scatter(
            torch.ones(4 * world, 2), torch.ones(2, 3), mode="ring", label="L0.fc2"
        )
    names = {e.name for e in prof.events()}
    for expected in [
        "tpscope/L0.fc1/ag_gemm",
        "tpscope/L0.fc1/ag_gemm/chunk0",
        "tpscope/L0.fc1/ag_gemm/chunk1",
        "tpscope/L0.fc2/gemm_rs",
        f"tpscope/L0.fc2/gemm_rs/chunk{world - 1}",
    ]:
        assert expected in names, (expected, sorted(n for n in names if n.startswith("tpscope")))


def _check_weight_gradient_paths(rank: int, world: int) -> None:
    """`wgrad_lhs` (AG side) and `overlap` (RS side) give what a float64 reference of the full
    tensors gives, in every mode; `overlap` runs exactly once."""
    rows_local, k, n, m = 4, 6, 5, 3
    g = torch.Generator().manual_seed(11)
    x_full = torch.randn(world * rows_local, k, generator=g)
    w = torch.randn(k, n, generator=g)
    lhs = torch.randn(world * rows_local, m, generator=g)
    y = torch.randn(world * rows_local, k, generator=g) * (rank + 1)
    wgrad_ref = lhs.double().t() @ x_full.double()
    ag_ref = x_full.double() @ w.double()
    x_shard = x_full[rank * rows_local : (rank + 1) * rows_local]
    for mode, chunks, own_first, taper in _variants(rows_local):
        out, grad_w = ops.all_gather_matmul(
            x_shard,
            w,
            mode=mode,
            chunks=chunks,
            own_first=own_first,
            wgrad_lhs=lhs,
            sm_margin=8,
            taper=taper,
        )
        what = f"{mode} k={chunks} own_first={own_first} taper={taper} world {world}"
        torch.testing.assert_close(out.double(), ag_ref, rtol=1e-5, atol=1e-5, msg=what)
        torch.testing.assert_close(grad_w.double(), wgrad_ref, rtol=1e-5, atol=1e-5, msg=what)
        calls = []
        rs, extra = ops.matmul_reduce_scatter(
            y,
            w,
            mode=mode,
            chunks=chunks,
            sm_margin=8,
            taper=taper,
            overlap=lambda calls=calls: calls.append(1) or lhs.t() @ lhs,
        )
        base = torch.randn(
            world * rows_local, k, generator=_seeded_after_draws(11, world, rows_local, k, n, m)
        )
        # every rank's y @ w
        total = sum((base.double() * (q + 1)) @ w.double() for q in range(world))
        torch.testing.assert_close(
            rs.double(),
            total[rank * rows_local : (rank + 1) * rows_local],
            rtol=1e-5,
            atol=1e-5,
            msg=what,
        )
        torch.testing.assert_close(extra, lhs.t() @ lhs, msg=what)
        assert calls == [1], what


def _seeded_after_draws(
    seed: int, world: int, rows_local: int, k: int, n: int, m: int
) -> torch.Generator:
    """A generator in the state `_check_weight_gradient_paths` had just before it drew `y`."""
    g = torch.Generator().manual_seed(seed)
    torch.randn(world * rows_local, k, generator=g)
    torch.randn(k, n, generator=g)
    torch.randn(world * rows_local, m, generator=g)
    return g


def _world2(rank: int, world: int) -> None:
    _check_modes(rank, world)
    _check_weight_gradient_paths(rank, world)
    _check_refusals(rank, world)
    _check_labels(rank, world)


def test_every_mode_equals_unfused_world2():
    run_world(_world2, 2)


def _world4(rank: int, world: int) -> None:
    _check_modes(rank, world)
    _check_weight_gradient_paths(rank, world)


def test_every_mode_equals_unfused_world4():
    run_world(_world4, 4)


def test_uninitialized_distributed_is_a_clear_error():
    with pytest.raises(RuntimeError, match="not initialized"):
        ops.all_gather_matmul(torch.zeros(2, 2), torch.zeros(2, 2))


def test_every_mode_has_both_ops_in_the_table():
    from tpscope.runfolder.fusion_choice import FIXED_MODES

    assert set(ops.ALL_GATHER_MATMUL) == set(ops.MATMUL_REDUCE_SCATTER) == set(FIXED_MODES)
