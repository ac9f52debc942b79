"""Mode symm_mem without torch's fused ops: a clear error, not an AttributeError."""

from __future__ import annotations

import pytest
import torch

from tpscope.fusion.ops import compat, symm


def test_missing_fused_ops_are_a_clear_error(monkeypatch):
    monkeypatch.setattr(compat, "symm_mem_ops", lambda: None)
    with pytest.raises(symm.SymmMemUnavailable, match="no symm_mem fused ops"):
        symm.ag_symm_mem(torch.zeros(2, 2), torch.zeros(2, 2), None)
    with pytest.raises(symm.SymmMemUnavailable, match="use none, chunked or ring"):
        symm.rs_symm_mem(torch.zeros(2, 2), torch.zeros(2, 2), None)
