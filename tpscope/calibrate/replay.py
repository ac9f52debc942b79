"""Replay one GEMM call alone and time it (metrics.md §8, "Calibration")."""

from __future__ import annotations

import json
import time

import torch

from tpscope.fusion.ops.resources import gemm_sm_margin
from tpscope.gemm_shapes import GEMM_OPERANDS, GemmCall

# `Input type` names -> torch dtypes that a GEMM can be replayed in
DTYPES = {
    "BFloat16": torch.bfloat16,
    "Half": torch.float16,
    "Float": torch.float32,
    "Double": torch.float64,
}


def operands(call: GemmCall, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A and B with the call's sizes, strides (its layout) and dtype; None when the dtype cannot be
    replayed (e.g. fp8 `_scaled_mm`)."""
    dtype = DTYPES.get(call.shape.dtype)
    if dtype is None:
        return None
    dims = json.loads(call.dims)
    strides = json.loads(call.strides) if call.strides else []
    ia, ib, _ = GEMM_OPERANDS[call.op]

    def make(i: int) -> torch.Tensor:
        size = [int(x) for x in dims[i]]
        st = (
            [int(x) for x in strides[i]]
            if i < len(strides) and len(strides[i]) == len(size)
            else None
        )
        if st is None or min(st, default=1) < 0:
            return torch.randn(size, dtype=dtype, device=device)
        storage = 1 + sum((n - 1) * s for n, s in zip(size, st))
        return torch.as_strided(torch.randn(storage, dtype=dtype, device=device), size, st)

    return make(ia), make(ib)


def gemm_fn(call: GemmCall, a: torch.Tensor, b: torch.Tensor):
    """The call's product (bias and scalars left out: the GEMM is what is timed)."""
    if GEMM_OPERANDS[call.op][2]:
        return lambda: torch.nn.functional.linear(a, b)
    return lambda: torch.matmul(a, b)


def time_call(
    call: GemmCall,
    device: torch.device,
    sm_margin: int,
    samples: int,
    per_sample: int,
    warmup: int = 3,
) -> list[float] | None:
    """`samples` times in µs, each the mean of `per_sample` back-to-back calls (CUDA events on a GPU,
    the wall clock on a CPU), with `sm_margin` SMs left free as in the run; None when the call
    cannot be replayed."""
    ops = operands(call, device)
    if ops is None:
        return None
    fn = gemm_fn(call, *ops)
    out = []
    with gemm_sm_margin(sm_margin, device):
        for _ in range(warmup):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(samples)
            ]
            for start, end in events:
                start.record()
                for _ in range(per_sample):
                    fn()
                end.record()
            torch.cuda.synchronize(device)
            out = [start.elapsed_time(end) * 1000.0 / per_sample for start, end in events]
        else:
            for _ in range(samples):
                t0 = time.perf_counter_ns()
                for _ in range(per_sample):
                    fn()
                out.append((time.perf_counter_ns() - t0) / 1000.0 / per_sample)
    return out
