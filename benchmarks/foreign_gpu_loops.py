"""GPU training loops as users write them with PyTorch's own APIs, profiled with torch.profiler, for
checking the analyzer on traces tpscope's runtime did not write:

- `prefetch`: an MLP trained on batches copied to the GPU on a side stream one step ahead; nothing
  synchronizes, so the CPU runs ahead of the GPU and each step launches the next step's copy while
  the GPU still works on the previous ones;
- `gpt2`: a Hugging Face GPT-2 (random weights, built from its config) with gradient accumulation
  over micro-batches, a DataLoader with worker processes, bf16 autocast, AdamW, and the loss read
  back every step; the backward's kernels are launched from the autograd engine's thread;
- `gpt2-compiled`: the same model under `torch.compile`.

    PYTHONPATH=. python3 benchmarks/foreign_gpu_loops.py --loop prefetch --out OUT_DIR

Writes the profiled steps' traces (`tensorboard_trace_handler`, gzip) to OUT_DIR and
OUT_DIR/step_times.json: per step, the CUDA-event time between the end of the previous step's work
and the end of its own on the main stream (the step's period), and the host's wall time per step.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch.profiler import (
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)


def _prefetch_loop(args, dev):
    h = args.hidden
    model = torch.nn.Sequential(
        *[
            torch.nn.Sequential(
                torch.nn.Linear(h, 4 * h), torch.nn.GELU(), torch.nn.Linear(4 * h, h)
            )
            for _ in range(args.layers)
        ]
    ).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    host_batches = [
        torch.randn(args.tokens, h, dtype=torch.bfloat16).pin_memory() for _ in range(2)
    ]
    copy_stream = torch.cuda.Stream()
    state = {"next": None, "ready": None}

    def prefetch(i):
        ev = torch.cuda.Event()
        with torch.cuda.stream(copy_stream):
            x = host_batches[i % 2].to(dev, non_blocking=True)
            ev.record(copy_stream)
        state["next"], state["ready"] = x, ev

    prefetch(0)

    def step(i):
        x, ready = state["next"], state["ready"]
        torch.cuda.current_stream().wait_event(ready)
        x.record_stream(torch.cuda.current_stream())
        with record_function("prefetch_next"):
            prefetch(i + 1)  # the next step's batch, on the side stream, now
        with record_function("forward"):
            loss = model(x).float().pow(2).mean()
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        return None  # nothing read back: the CPU runs ahead

    return step


class _Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        self.n, self.seq, self.vocab = n, seq, vocab

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, self.vocab, (self.seq,), generator=g)


def _gpt2_loop(args, dev, compiled):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        n_layer=args.layers, n_embd=args.hidden, n_head=args.heads, n_positions=args.seq,
        vocab_size=args.vocab,
    )  # fmt: skip
    model = GPT2LMHeadModel(cfg).to(dev)
    model.train()
    run = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(
        _Tokens(10_000, args.seq, args.vocab),
        batch_size=args.micro_batch,
        num_workers=args.workers,
        pin_memory=True,
        persistent_workers=True,
    )
    batches = iter(loader)
    losses = []

    def step(i):
        total = 0.0
        for _ in range(args.accum):
            ids = next(batches).to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = run(input_ids=ids, labels=ids)
            loss = out.loss / args.accum
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(total.item()))  # logged every step, as training scripts do
        return losses[-1]

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop", choices=["prefetch", "gpt2", "gpt2-compiled"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--tokens", type=int, default=8192, help="prefetch: rows per batch")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--wait", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--active", type=int, default=4)
    args = ap.parse_args()
    if args.hidden is None:
        args.hidden = 2048 if args.loop == "prefetch" else 512
    if args.layers is None:
        args.layers = 4
    if args.wait is None:
        args.wait = 4 if args.loop == "gpt2-compiled" else 1
    dev = torch.device("cuda")
    torch.manual_seed(0)
    if args.loop == "prefetch":
        step = _prefetch_loop(args, dev)
    else:
        step = _gpt2_loop(args, dev, compiled=args.loop == "gpt2-compiled")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n_steps = args.wait + args.warmup + args.active
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_steps)]
    wall = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=args.wait, warmup=args.warmup, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(out), worker_name="rank0", use_gzip=True),
        record_shapes=True,
    ) as prof:
        for i in range(n_steps):
            t0 = time.perf_counter()
            step(i)
            ends[i].record()  # on the main stream, after the step's last launch
            wall.append((time.perf_counter() - t0) * 1e3)
            prof.step()
    torch.cuda.synchronize()
    period = [None] + [ends[i - 1].elapsed_time(ends[i]) for i in range(1, n_steps)]
    (out / "step_times.json").write_text(
        json.dumps(
            {
                "loop": args.loop,
                "period_ms": period,
                "host_wall_ms": wall,
                "profiled_from": args.wait + args.warmup,
                "args": vars(args),
                "gpu": torch.cuda.get_device_name(),
                "torch": torch.__version__,
            },
            indent=1,
        )
    )
    print(args.loop, "period ms", [None if p is None else round(p, 3) for p in period])
    print(args.loop, "host wall ms", [round(w, 3) for w in wall])


if __name__ == "__main__":
    main()
