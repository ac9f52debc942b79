"""`none`: the collective and the GEMM one after the other (the baseline every fusion is measured
against; it never overlaps)."""

from __future__ import annotations

import torch

from tpscope.fusion.ops import compat
from tpscope.fusion.ops.common import AgCall, RsCall


def ag(x: torch.Tensor, w: torch.Tensor, c: AgCall):
    """(out, gathered, None): all-gather, then one GEMM."""
    gathered = x.new_empty(c.tp * x.shape[0], x.shape[1])
    compat.all_gather_single(gathered, x, group=c.group)
    return gathered @ w, gathered, None


def rs(y: torch.Tensor, w: torch.Tensor, c: RsCall):
    """(out, None): one GEMM, then reduce-scatter."""
    partial = y @ w
    out = partial.new_empty(y.shape[0] // c.tp, w.shape[1])
    compat.reduce_scatter_single(out, partial, group=c.group)
    return out, None
