"""GEMM shapes from a CPU op's recorded inputs (metrics.md §8), with nothing but the standard library:
shared by the analyzer (`tpscope.metrics.gemm`) and by `tpscope calibrate`'s replay, which runs on a
GPU machine that has torch but not the analyzer's libraries."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

# metrics.md §8: GEMM ops -> (index of A in `Input Dims`, index of B, B is stored [N, K] as in linear)
GEMM_OPERANDS: dict[str, tuple[int, int, bool]] = {
    "aten::mm": (0, 1, False),
    "aten::addmm": (1, 2, False),
    "aten::addmm_": (1, 2, False),  # in place: gradient accumulation into a weight's .grad
    "aten::_addmm_activation": (1, 2, False),
    "aten::bmm": (0, 1, False),
    "aten::baddbmm": (1, 2, False),
    "aten::baddbmm_": (1, 2, False),
    "aten::addbmm": (1, 2, False),  # Σ over the batch of A[b]·B[b]: batch × M × K × N as well
    "aten::addbmm_": (1, 2, False),
    "aten::matmul": (0, 1, False),
    "aten::linear": (0, 1, True),
    "aten::_scaled_mm": (0, 1, False),
}


@dataclass(frozen=True, slots=True, order=True)
class GemmShape:
    """One GEMM class: C[batch, M, N] = A[batch, M, K] · B[batch, K, N] in `dtype`."""

    batch: int
    m: int
    k: int
    n: int
    dtype: str

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    @property
    def label(self) -> str:
        b = f"{self.batch}×" if self.batch != 1 else ""
        return f"{b}{self.m}×{self.k}×{self.n} {self.dtype}"


def parse_shape(op: str, dims: str, types: str) -> GemmShape | None:
    """The shape of one GEMM op from its raw `Input Dims` / `Input type` JSON; None when `op` is no
    GEMM or its dims do not describe one."""
    rule = GEMM_OPERANDS.get(op)
    if rule is None:
        return None
    ia, ib, b_is_nk = rule
    try:
        d = json.loads(dims)
        a, b = [int(x) for x in d[ia]], [int(x) for x in d[ib]]
        t = json.loads(types) if types else []
        dtype = str(t[ia]).removeprefix("c10::") if len(t) > ia else "?"
    except (ValueError, TypeError, IndexError):
        return None
    if len(a) < 2 or len(b) < 1 or min(a + b) <= 0:
        return None
    if b_is_nk:
        if len(b) != 2 or b[1] != a[-1]:
            return None
        return GemmShape(1, math.prod(a[:-1]), a[-1], b[0], dtype)
    if len(b) < 2 or b[-2] != a[-1]:
        return None
    if len(b) == 2:
        return GemmShape(1, math.prod(a[:-1]), a[-1], b[-1], dtype)
    batch = max(math.prod(a[:-2]), math.prod(b[:-2]))
    return GemmShape(batch, a[-2], a[-1], b[-1], dtype)


@dataclass(frozen=True, slots=True)
class GemmCall:
    """One distinct GEMM call of a run as its CPU op recorded it: what `tpscope calibrate` replays."""

    op: str
    dims: str  # raw `Input Dims` JSON
    strides: str  # raw `Input Strides` JSON ("" when the trace has none)
    types: str  # raw `Input type` JSON
    shape: GemmShape

    @classmethod
    def of(cls, op: str, dims: str, strides: str, types: str) -> GemmCall | None:
        """The call, or None when it is no GEMM."""
        shape = parse_shape(op, dims, types)
        return cls(op, dims, strides, types, shape) if shape is not None else None
