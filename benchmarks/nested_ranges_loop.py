"""A plain training loop as users write it, for checking the analyzer on traces tpscope's runtime
did not write: every op sits in nested `record_function` ranges (step > forward/backward > block >
op), a side stream copies activations under an event wait, the loss is read back every step (a
CPU-GPU synchronization), and a burst of small kernels makes one stretch of each step CPU-bound.

    PYTHONPATH=. python3 benchmarks/nested_ranges_loop.py --out OUT_DIR [--steps 9]

One GPU, or several under torchrun (then gradients are all-reduced over NCCL on the side stream).
Writes torch.profiler traces (with cuda_sync events) of the last `--active` steps to OUT_DIR, and
OUT_DIR/step_times.json with each step's CUDA-event time.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.profiler import (
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument(
        "--small-kernels", type=int, default=200, help="tiny kernels launched one by one per step"
    )
    ap.add_argument("--wait", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--active", type=int, default=6)
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dev = torch.device("cuda")
    torch.manual_seed(0)
    h = args.hidden
    blocks = [
        torch.nn.Sequential(
            torch.nn.LayerNorm(h),
            torch.nn.Linear(h, 4 * h),
            torch.nn.GELU(),
            torch.nn.Linear(4 * h, h),
        )
        for _ in range(args.layers)
    ]
    model = torch.nn.ModuleList(blocks).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(args.tokens, h, device=dev, dtype=torch.bfloat16)
    target = torch.randn_like(x)
    side = torch.cuda.Stream()
    small = torch.zeros(64, device=dev)
    n_steps = args.wait + args.warmup + args.active
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(n_steps)
    ]
    try:
        from torch._C._profiler import _ExperimentalConfig

        extra = {"experimental_config": _ExperimentalConfig(enable_cuda_sync_events=True)}
    except (ImportError, TypeError):
        extra = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    losses = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=args.wait, warmup=args.warmup, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(
            str(out), worker_name=f"rank{rank}", use_gzip=True
        ),
        record_shapes=True,
        **extra,
    ) as prof:
        for step in range(n_steps):
            events[step][0].record()
            with record_function("train_step"):
                with record_function("forward"):
                    y = x
                    for i, block in enumerate(model):
                        with record_function(f"block{i}"):
                            y = y + block(y)
                    with record_function("loss"):
                        loss = torch.nn.functional.mse_loss(y.float(), target.float())
                with record_function("side_copy"):  # a second stream that waits for the forward
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        y_copy = y.detach().clone()
                    torch.cuda.current_stream().wait_stream(side)
                with record_function("backward"):
                    loss.backward()
                if world > 1:
                    with record_function("grad_allreduce"):
                        side.wait_stream(torch.cuda.current_stream())
                        with torch.cuda.stream(side):
                            for p in model.parameters():
                                dist.all_reduce(p.grad)
                        torch.cuda.current_stream().wait_stream(side)
                with record_function("optimizer"):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                # CPU-bound: each kernel is shorter than its launch
                with record_function("small_kernels"):
                    for _ in range(args.small_kernels):
                        small.add_(1.0)
                with record_function("read_loss"):
                    losses.append(float(loss.item()) + 0.0 * float(y_copy[0, 0]))
            events[step][1].record()
            prof.step()
    torch.cuda.synchronize()
    times = [a.elapsed_time(b) for a, b in events]
    (out / f"step_times_rank{rank}.json").write_text(
        json.dumps(
            {
                "step_ms": times,
                "profiled_from": args.wait + args.warmup,
                "losses": losses,
                "gpu": torch.cuda.get_device_name(),
                "torch": torch.__version__,
            },
            indent=1,
        )
    )
    print(f"rank {rank}: step ms {[round(t, 3) for t in times]}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
