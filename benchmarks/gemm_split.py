"""What splitting a GEMM by rows costs on this GPU, and how much of it a second stream wins back.

The fused AG-GEMM and GEMM-RS multiply a layer's rows in pieces (the own shard, then each peer's),
one cuBLAS GEMM each. A piece of half the rows can leave its last wave of tiles nearly empty.
Issued on a second, higher-priority stream, the next piece may start its tiles while the one
before drains (the tail-fill lever, dropped: docs/decisions.md, "Tail fill"). No communication
here: per shape, round robin (tpscope.fusion.tuning.timing.time_regions),

- `full`: one GEMM over all rows (what unfused runs);
- `halves`: two GEMMs of half the rows, one after the other (what the fused modes run);
- `halves/tail`: the second on a stream of priority -1, launched together;
- `half+quarters` and `half+quarters/tail`: the own half, then two quarters (copy_engine k=2).

Run under torchrun (every rank times its own GPU; the slowest rank per repetition counts):

    torchrun --nproc-per-node 2 benchmarks/gemm_split.py --json gemm_split.json
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist

from tpscope.fusion.tuning.timing import time_regions

SHAPES = {
    # name: (rows M, inner K, columns N) of `[M, K] @ [K, N]`, the per-rank GEMMs at TP=2
    "ref-ag (fc1)": (8192, 8192, 14336),
    "ref-rs (fc2)": (8192, 14336, 8192),
    "qkv": (8192, 8192, 12288),
    "attn-out": (8192, 4096, 8192),
    "8b-ag": (8192, 4096, 7168),
    "8b-rs": (8192, 7168, 4096),
    "s4096-ag": (4096, 8192, 14336),
    "s4096-rs": (4096, 14336, 8192),
    "s16384-ag": (16384, 8192, 14336),
}


def pieces_fns(a: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> dict:
    """The timed functions of one shape (module docstring)."""
    m = a.shape[0]
    tail = torch.cuda.Stream(device=a.device, priority=-1)
    main = torch.cuda.current_stream(a.device)

    def run(bounds: list[tuple[int, int]], use_tail: bool):
        def fn():
            lo, hi = bounds[0]
            if use_tail:
                tail.wait_stream(main)
            torch.mm(a[lo:hi], w, out=out[lo:hi])
            for lo, hi in bounds[1:]:
                if use_tail:
                    with torch.cuda.stream(tail):
                        torch.mm(a[lo:hi], w, out=out[lo:hi])
                else:
                    torch.mm(a[lo:hi], w, out=out[lo:hi])
            if use_tail:
                main.wait_stream(tail)

        return fn

    half, quarter = m // 2, m // 4
    halves = [(0, half), (half, m)]
    quarters = [(0, half), (half, half + quarter), (half + quarter, m)]
    return {
        "full": run([(0, m)], False),
        "halves": run(halves, False),
        "halves/tail": run(halves, True),
        "half+quarters": run(quarters, False),
        "half+quarters/tail": run(quarters, True),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    results = []
    for name, (m, k, n) in SHAPES.items():
        g = torch.Generator(device=device).manual_seed(1 + dist.get_rank())
        a = (torch.randn(m, k, generator=g, device=device) * 0.1).bfloat16()
        w = (torch.randn(k, n, generator=g, device=device) * 0.1).bfloat16()
        out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        fns = pieces_fns(a, w, out)
        ref = a @ w
        for label, fn in fns.items():  # every variant computes the same product
            out.zero_()
            fn()
            torch.cuda.synchronize()
            err = float((out.float() - ref.float()).abs().max() / ref.float().abs().max())
            if err > 2e-2:
                raise SystemExit(
                    f"gemm_split: {name} {label} differs from one GEMM (rel. err {err:.1e})"
                )
        timed = time_regions(fns, device=device, reps=args.reps, warmup=args.warmup)
        full = timed["full"].median_ms
        row = {
            "shape": name,
            "M": m,
            "K": k,
            "N": n,
            "timing": {label: t.as_dict() for label, t in timed.items()},
            "vs_full": {label: t.median_ms / full for label, t in timed.items()},
        }
        results.append(row)
        if dist.get_rank() == 0:
            cells = "  ".join(
                f"{label} {t.median_ms:.3f} ({t.median_ms / full:.3f}x)"
                for label, t in timed.items()
            )
            print(f"{name:<14} M,K,N={m},{k},{n}  {cells}", flush=True)
    if dist.get_rank() == 0 and args.json:
        doc = {
            "torch_version": torch.__version__,
            "gpu_name": torch.cuda.get_device_name(device),
            "reps": args.reps,
            "warmup": args.warmup,
            "dtype": "bfloat16",
            "timing": "round robin, slowest rank per repetition, cuda events",
            "results": results,
        }
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
