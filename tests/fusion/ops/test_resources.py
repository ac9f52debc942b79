"""SM margin and CTA cap: what they set, that they restore it, and that CPU runs ignore them."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from tests.fusion._dist import run_world
from tpscope.fusion.ops import resources
from tpscope.fusion.ops.resources import fusion_group, gemm_sm_margin


class _FakeCuda:
    """Stands in for torch's cuBLAS settings, which a CPU build cannot change."""

    def __init__(self) -> None:
        self.library, self.margin, self.log = "cublas", None, []

    def preferred_blas_library(self, backend=None):
        if backend is not None:
            self.library = backend
            self.log.append(("library", backend))
        return self.library

    def set_margin(self, value):
        self.margin = value
        self.log.append(("margin", value))


@pytest.fixture
def fake(monkeypatch):
    f = _FakeCuda()
    monkeypatch.setattr(torch.backends.cuda, "preferred_blas_library", f.preferred_blas_library)
    monkeypatch.setattr(torch._C, "_set_sm_carveout_experimental", f.set_margin)
    monkeypatch.setattr(torch._C, "_get_sm_carveout_experimental", lambda: f.margin)
    return f


def test_margin_selects_cublaslt_and_restores_both_settings(fake):
    with gemm_sm_margin(16, torch.device("cuda")):
        assert (fake.library, fake.margin) == ("cublaslt", 16)
    assert (fake.library, fake.margin) == ("cublas", None)
    with pytest.raises(ValueError), gemm_sm_margin(8, torch.device("cuda", 1)):
        raise ValueError("a GEMM failed")
    # restored on the way out of an error too
    assert (fake.library, fake.margin) == (
        "cublas",
        None,
    )


def test_margin_nests_and_zero_or_cpu_changes_nothing(fake):
    with gemm_sm_margin(16, torch.device("cuda")):
        with gemm_sm_margin(0, torch.device("cuda")), gemm_sm_margin(8, torch.device("cpu")):
            assert fake.margin == 16
        with gemm_sm_margin(4, torch.device("cuda")):
            assert fake.margin == 4
        assert (fake.library, fake.margin) == ("cublaslt", 16)
    assert (fake.library, fake.margin) == ("cublas", None)


def _groups(rank: int, world: int) -> None:
    assert fusion_group(None, 0) is None  # no cap: the caller's own group
    assert fusion_group(None, 4) is None  # gloo has no CTAs: the caller's own group
    sub = dist.new_group([0, 1])
    dist.barrier(group=sub)  # the group is connected on both ranks
    assert fusion_group(sub, 4) is sub
    assert resources._GROUPS == {}


def test_cta_cap_leaves_gloo_groups_alone():
    run_world(_groups, 2)
