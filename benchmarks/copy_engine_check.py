"""Back-to-back check of copy_engine: many fused calls queued without a host sync, every output
compared with unfused afterwards. A race on the symmetric buffers (a push landing in a region a
peer still reads) shows as a wrong output here, where the bench's single checked call would miss it.

    torchrun --nproc-per-node 2 benchmarks/copy_engine_check.py
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter
from tpscope.runfolder.regimes import apply_in_process

TOLERANCE = 2e-2


def main() -> int:
    apply_in_process("nvlink", os.environ)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    rank, tp = dist.get_rank(), dist.get_world_size()
    g = torch.Generator(device=device).manual_seed(11 + rank)

    def rnd(*size: int) -> torch.Tensor:
        return (torch.randn(*size, generator=g, device=device) * 0.1).bfloat16()

    shapes = [(4096, 2048, 3072), (8192, 4096, 7168), (2048, 1024, 1536)]
    calls, fused = [], []
    for i in range(60):  # queued back to back: AG (forward and weight-gradient forms) and RS
        s, h, f = shapes[i % len(shapes)]
        chunks = 1 + i % 2
        kind = ("ag", "ag_wgrad", "rs")[i % 3]
        if kind == "rs":
            args = (rnd(s, f // tp), rnd(f // tp, h))
            fused.append(matmul_reduce_scatter(*args, mode="copy_engine", chunks=chunks))
        elif kind == "ag":
            args = (rnd(s // tp, h), rnd(h, f // tp))
            fused.append(
                all_gather_matmul(*args, mode="copy_engine", chunks=chunks, return_gathered=True)
            )
        else:
            args = (rnd(s // tp, h), rnd(h, f // tp), rnd(s, 512))
            fused.append(
                all_gather_matmul(*args[:2], mode="copy_engine", chunks=chunks, wgrad_lhs=args[2])
            )
        calls.append((kind, args))
    torch.cuda.synchronize()
    worst = 0.0
    for (kind, args), got in zip(calls, fused):
        if kind == "rs":
            ref = (matmul_reduce_scatter(*args, mode="none"),)
            got = (got,)
        elif kind == "ag":
            ref = all_gather_matmul(*args, mode="none", return_gathered=True)
        else:
            ref = all_gather_matmul(*args[:2], mode="none", wgrad_lhs=args[2])
        for a, b in zip(got, ref):
            err = float((a.float() - b.float()).abs().max() / b.float().abs().max())
            worst = max(worst, err)
    ok = torch.tensor([worst], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MAX)
    if rank == 0:
        verdict = "ok" if ok.item() <= TOLERANCE else "WRONG"
        print(
            f"copy_engine_check: {len(calls)} calls back to back, worst relative error {ok.item():.2e}: {verdict}",
            flush=True,
        )
    dist.destroy_process_group()
    return 0 if ok.item() <= TOLERANCE else 1


if __name__ == "__main__":
    raise SystemExit(main())
