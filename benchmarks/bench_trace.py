"""Kineto traces of the bench's calls at one shape: where the time of a fused op goes on the GPU.

`tpscope bench` gives each variant's time; this records what the GPU ran during a few of those
calls (each after the ranks are aligned, with `--feed-ahead-ms` of GPU work queued first, as the
bench does), one trace per rank, to read with `tpscope analyze` or by eye:

    torchrun --nproc-per-node 2 benchmarks/bench_trace.py --shape ref --out traces/

Calls per side: the GEMM alone, unfused, and (`--regime nvlink`) copy_engine (AG: push and
pull) or (`--regime shm`) chunked (AG, RS) and ring (RS) at 4 chunks, even and tapered, 3 times
each.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter
from tpscope.fusion.tuning.shapes import parse_shape
from tpscope.fusion.tuning.timing import align_ranks, spin_cycles_per_ms
from tpscope.runfolder.regimes import apply_defaults, apply_in_process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="ref")
    parser.add_argument("--out", required=True)
    parser.add_argument("--feed-ahead-ms", type=float, default=2.0)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--regime", choices=("nvlink", "shm"), default="nvlink")
    parser.add_argument(
        "--set",
        choices=("modes", "rs-exchange"),
        default="modes",
        help="shm: chunked and ring at 4 chunks (modes), or the ring GEMM-RS at 8 chunks "
        "swapping pieces by send/recv and by all-gather (rs-exchange)",
    )
    args = parser.parse_args()
    apply_in_process(args.regime, os.environ)
    apply_defaults(os.environ)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    rank, tp = dist.get_rank(), dist.get_world_size()
    s, h, f = parse_shape(args.shape)
    g = torch.Generator(device=device).manual_seed(3 + rank)

    def rnd(*size: int) -> torch.Tensor:
        return (torch.randn(*size, generator=g, device=device) * 0.1).bfloat16()

    x, w1 = rnd(s // tp, h), rnd(h, f // tp)
    gathered = rnd(s, h)
    y, w2 = rnd(s, f // tp), rnd(f // tp, h)
    nvlink = {
        "ag/gemm": lambda: gathered @ w1,
        "ag/unfused": lambda: all_gather_matmul(x, w1, mode="none", return_gathered=True),
        "ag/copy_engine/push": lambda: all_gather_matmul(
            x, w1, mode="copy_engine", chunks=1, return_gathered=True
        ),
        "ag/copy_engine/pull": lambda: all_gather_matmul(
            x, w1, mode="copy_engine", chunks=1, return_gathered=True, copy_push=False
        ),
        "rs/gemm": lambda: y @ w2,
        "rs/unfused": lambda: matmul_reduce_scatter(y, w2, mode="none"),
        "rs/copy_engine": lambda: matmul_reduce_scatter(y, w2, mode="copy_engine", chunks=1),
    }
    shm = {
        "ag/gemm": nvlink["ag/gemm"],
        "ag/unfused": nvlink["ag/unfused"],
        "rs/gemm": nvlink["rs/gemm"],
        "rs/unfused": nvlink["rs/unfused"],
    }
    for taper in (False, True):
        tag = "/taper" if taper else ""
        shm[f"ag/chunked/k4/m16{tag}"] = lambda t=taper: all_gather_matmul(
            x, w1, mode="chunked", chunks=4, sm_margin=16, return_gathered=True, taper=t
        )
        shm[f"rs/ring/k4/m4{tag}"] = lambda t=taper: matmul_reduce_scatter(
            y, w2, mode="ring", chunks=4, sm_margin=4, taper=t
        )
        shm[f"rs/chunked/k4/m4{tag}"] = lambda t=taper: matmul_reduce_scatter(
            y, w2, mode="chunked", chunks=4, sm_margin=4, taper=t
        )
    exchange = {"rs/gemm": nvlink["rs/gemm"], "rs/unfused": nvlink["rs/unfused"]}
    for margin in (4, 16):
        for agx in (False, True):
            exchange[f"rs/ring/k8/m{margin}/taper" + ("/agx" if agx else "")] = (
                lambda m=margin, a=agx: matmul_reduce_scatter(
                    y, w2, mode="ring", chunks=8, sm_margin=m, ring_all_gather=a
                )
            )
    fns = nvlink if args.regime == "nvlink" else shm if args.set == "modes" else exchange
    spin = int(args.feed_ahead_ms * spin_cycles_per_ms(device))
    token = torch.zeros(1, device=device)

    def aligned(name: str, fn) -> None:
        align_ranks(device, token)
        torch.cuda._sleep(spin)
        with record_function(f"bench_trace/{name}"):
            fn()

    for name, fn in fns.items():  # warm-up: cuBLAS heuristics, symmetric-memory workspace
        for _ in range(3):
            aligned(name, fn)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            for name, fn in fns.items():
                aligned(name, fn)
        torch.cuda.synchronize()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"rank{rank}.pt.trace.json")
    if rank == 0:
        with open(os.path.join(args.out, "calls.txt"), "w") as fh:  # the order of the calls
            fh.write("\n".join(fns) + "\n")
    prof.export_chrome_trace(path)
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
