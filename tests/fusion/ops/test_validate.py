"""Shape checks: every refusal names what is wrong (the ops call them before any collective;
tests/fusion/ops/test_api.py checks that no collective runs)."""

from __future__ import annotations

import pytest
import torch

from tpscope.fusion.ops.validate import (
    FusionShapeError,
    check_all_gather_matmul,
    check_host_local,
    check_matmul_reduce_scatter,
    check_nodes,
)


def test_all_gather_matmul_checks():
    x, w = torch.zeros(8, 4), torch.zeros(4, 6)
    check_all_gather_matmul(x, w, 2, "chunked", 8)  # 8 rows, 8 chunks: legal
    with pytest.raises(FusionShapeError, match="inner dimensions"):
        check_all_gather_matmul(x, torch.zeros(5, 6), 2, "none", 1)
    with pytest.raises(FusionShapeError, match="do not split into 3 chunks"):
        check_all_gather_matmul(x, w, 2, "chunked", 3)
    with pytest.raises(FusionShapeError, match="2-D"):
        check_all_gather_matmul(torch.zeros(2, 4, 4), w, 2, "none", 1)
    with pytest.raises(FusionShapeError, match="float64"):
        check_all_gather_matmul(x.double(), w, 2, "none", 1)
    with pytest.raises(FusionShapeError, match="mode must be"):
        check_all_gather_matmul(x, w, 2, "auto", 1)


def test_matmul_reduce_scatter_checks():
    y, w = torch.zeros(12, 4), torch.zeros(4, 6)
    check_matmul_reduce_scatter(y, w, 2, "chunked", 6)
    with pytest.raises(FusionShapeError, match="do not split over 5 ranks"):
        check_matmul_reduce_scatter(y, w, 5, "none", 1)
    with pytest.raises(FusionShapeError, match="6 rows per rank, which do not split into 4 chunks"):
        check_matmul_reduce_scatter(y, w, 2, "chunked", 4)


@pytest.mark.parametrize("mode", ["symm_mem", "copy_engine"])
def test_symmetric_memory_modes_on_cpu_are_a_clear_error(mode):
    with pytest.raises(FusionShapeError, match=f"{mode} needs CUDA"):
        check_all_gather_matmul(torch.zeros(4, 4), torch.zeros(4, 4), 2, mode, 1)
    with pytest.raises(FusionShapeError, match=f"{mode} needs CUDA"):
        check_matmul_reduce_scatter(torch.zeros(4, 4), torch.zeros(4, 4), 2, mode, 1)


def test_symm_mem_on_cpu_is_a_clear_error():
    with pytest.raises(FusionShapeError, match="symm_mem needs CUDA"):
        check_all_gather_matmul(torch.zeros(4, 4), torch.zeros(4, 4), 2, "symm_mem", 1)
    with pytest.raises(FusionShapeError, match="symm_mem needs CUDA"):
        check_matmul_reduce_scatter(torch.zeros(4, 4), torch.zeros(4, 4), 2, "symm_mem", 1)


def test_refusals_name_the_ranks():
    check_host_local(["a", "a"], ["cpu", "cpu"])
    with pytest.raises(FusionShapeError, match="one host.*rank 0 on a, rank 1 on b"):
        check_host_local(["a", "b"], ["cuda", "cuda"])
    with pytest.raises(
        FusionShapeError, match="same kind of device; rank 0 on cpu, rank 1 on cuda"
    ):
        check_host_local(["a", "a"], ["cpu", "cuda"])
    check_nodes("host_staged", 1)
    check_nodes("chunked", 4)
    with pytest.raises(FusionShapeError, match="must be on one node, not 2"):
        check_nodes("host_staged", 2)
