"""Mode host_staged on ONE GPU: what can be measured without a second one.

    PYTHONPATH=. python3 benchmarks/host_staged_one_gpu.py --out host_staged_one_gpu.json

(a) `bandwidth`: device -> host and host -> device copies through the registered shared file
    (tpscope.fusion.ops.host_shm, as the mode maps it), alone and both directions at once, at the piece
    sizes of the reference and 8B shapes at TP=2 (1, 2 and 4 pieces per shard); beside them a
    buffer pinned by torch and a pageable one; and the cost of one flag written and waited for on a
    stream (cuStreamWriteValue32 + cuStreamWaitValue32).
(b) `contention`: each shape's AG-side and RS-side GEMM alone, beside the D2H + H2D copies of its
    op's transfer (the copy engines), and beside an SM-based device copy of the same bytes (an
    elementwise kernel, a proxy for NCCL's copy kernels): the GEMM's slowdown and the copies'
    time in each case, CUDA events, medians over round-robin repetitions, each start fed ahead by a
    spin kernel so that the CPU's launches are not timed.
(c) `two_processes`: two processes on the one GPU (a gloo group for the set-up, CUDA tensors), the
    mode end to end: AG-GEMM, GEMM-RS and both layers' backward against references computed from
    every rank's inputs, 30 calls queued back to back without a host sync (a race between the
    ranks shows as a wrong output), and the calls timed. The two processes time-slice the GPU, so
    (c)'s times prove that the cross-process ordering works on CUDA, not how fast the mode is;
    with `--gpus 2` (two GPUs of one host, no NCCL needed) each process has its own GPU and they are.

Needs torch with CUDA (2.11 or later) and nothing else of the analyzer. Prints progress; writes
everything measured (and any part's error) to --out after each part. Takes about 2 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

SHAPES = {"ref": (8192, 8192, 28672), "8b": (8192, 4096, 14336)}
TP = 2
PIECES = (1, 2, 4)
NEED_BYTES = 1 << 30  # the largest regions here (the reference shape's, 256 MiB) with room to spare
TOLERANCE = 2e-2
"""Largest relative error of a bfloat16 output against its reference (as benchmarks/copy_engine_check.py);
the same checks on CPU gave at most 7e-3."""
SPIN_CYCLES = 5_000_000  # a few ms of spin before each timed start (the CPU queues meanwhile)


def say(msg: str) -> None:
    print(f"[host_staged_one_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median_ms(samples: list[float]) -> dict:
    s = sorted(samples)
    return {
        "median_ms": statistics.median(s),
        "p10_ms": s[len(s) // 10],
        "p90_ms": s[(len(s) * 9) // 10],
        "reps": len(s),
    }


def env_info() -> dict:
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "python": sys.version.split()[0],
    }
    try:
        st = os.statvfs("/dev/shm")
        info["dev_shm_free_bytes"] = st.f_bavail * st.f_frsize
    except OSError as exc:
        info["dev_shm_error"] = str(exc)
    # under NEED_BYTES the regions go to anonymous shared memory (the mode's own fallback)
    info["regions_in"] = (
        "/dev/shm" if info.get("dev_shm_free_bytes", 0) >= NEED_BYTES else "/dev/shm or memfd"
    )
    return info


def make_region(slot_bytes: int, device: torch.device):
    """A region as the mode makes it (file in /dev/shm, mapped, registered), for rank 0 of 2;
    its file unlinked at once."""
    from tpscope.fusion.ops import host_shm

    nbytes = host_shm._round_up(2 * TP * host_shm.FLAG_LINE) + 2 * TP * slot_bytes
    path = host_shm._create(host_shm.shm_dir(), nbytes)
    try:
        return host_shm.Region(path, TP, 0, slot_bytes, device)
    finally:
        host_shm._release(path)


# -------------------------------------------------------------------------------- (a) bandwidth


def part_bandwidth(reps: int) -> dict:
    dev = torch.device("cuda", 0)
    sizes = sorted({(s // TP // k) * h * 2 for s, h, _ in SHAPES.values() for k in PIECES})
    biggest = sizes[-1]
    reg = make_region(biggest, dev)
    out_slot = reg.bytes[reg.header_bytes : reg.header_bytes + biggest]
    # "rank 1"'s slot
    in_slot = reg.bytes[reg.header_bytes + 2 * biggest : reg.header_bytes + 3 * biggest]
    in_slot.fill_(1)
    src = torch.ones(biggest, dtype=torch.uint8, device=dev)
    dst = torch.empty(biggest, dtype=torch.uint8, device=dev)
    d2h_s, h2d_s = torch.cuda.Stream(), torch.cuda.Stream()
    main = torch.cuda.current_stream()
    result: dict = {"sizes_bytes": sizes, "shared_file": {}, "pinned_by_torch": {}, "pageable": {}}

    def timed(fns_by_stream) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN_CYCLES)
        start.record(main)
        for stream, fn in fns_by_stream:
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                fn()
        for stream, _ in fns_by_stream:
            main.wait_stream(stream)
        end.record(main)
        end.synchronize()
        return start.elapsed_time(end)

    def measure(host_out, host_in, n: int) -> dict:
        cases = {
            "d2h": [(d2h_s, lambda: host_out[:n].copy_(src[:n], non_blocking=True))],
            "h2d": [(h2d_s, lambda: dst[:n].copy_(host_in[:n], non_blocking=True))],
            "both": [
                (d2h_s, lambda: host_out[:n].copy_(src[:n], non_blocking=True)),
                (h2d_s, lambda: dst[:n].copy_(host_in[:n], non_blocking=True)),
            ],
        }
        samples = {k: [] for k in cases}
        for i in range(reps + 3):
            for k, fns in cases.items():
                t = timed(fns)
                if i >= 3:
                    samples[k].append(t)
        out = {}
        for k, v in samples.items():
            m = median_ms(v)
            moved = n * (2 if k == "both" else 1)
            m["gbps"] = moved / (m["median_ms"] * 1e-3) / 1e9
            out[k] = m
        return out

    for n in sizes:
        result["shared_file"][str(n)] = measure(out_slot, in_slot, n)
        say(
            f"(a) shared file {n / 2**20:.0f} MiB: d2h {result['shared_file'][str(n)]['d2h']['gbps']:.1f} GB/s, "
            f"h2d {result['shared_file'][str(n)]['h2d']['gbps']:.1f}, both {result['shared_file'][str(n)]['both']['gbps']:.1f}"
        )
    pinned = torch.empty(biggest, dtype=torch.uint8, pin_memory=True)
    pinned.fill_(1)
    result["pinned_by_torch"][str(biggest)] = measure(pinned, pinned, biggest)
    pageable = torch.ones(biggest, dtype=torch.uint8)
    result["pageable"][str(biggest)] = measure(pageable, pageable, biggest)
    say(
        f"(a) torch-pinned {biggest / 2**20:.0f} MiB d2h {result['pinned_by_torch'][str(biggest)]['d2h']['gbps']:.1f} GB/s,"
        f" pageable {result['pageable'][str(biggest)]['d2h']['gbps']:.1f} GB/s"
    )

    # one flag raised and waited for on a stream, 100 times in a row
    flag = reg.ready(0)
    samples = []
    for rep in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        for i in range(100):
            value = 1 + rep * 100 + i
            reg.post(flag, value)
            reg.wait(flag, value, "self")
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / 100)
    result["flag_write_then_wait_us"] = median_ms(samples)
    result["flag_write_then_wait_us"]["unit"] = "us per write+wait pair (median_ms field holds us)"
    say(f"(a) flag write+wait on a stream: {result['flag_write_then_wait_us']['median_ms']:.2f} us")
    reg.close()
    return result


# ------------------------------------------------------------------------------- (b) contention


def part_contention(reps: int) -> dict:
    dev = torch.device("cuda", 0)
    main = torch.cuda.current_stream()
    d2h_s, h2d_s, sm_s = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    out: dict = {}
    for name, (s, h, f) in SHAPES.items():
        nbytes = (s // TP) * h * 2  # one rank's transfer per direction, either side, bf16
        reg = make_region(nbytes, dev)
        host_out = reg.bytes[reg.header_bytes : reg.header_bytes + nbytes]
        host_in = reg.bytes[reg.header_bytes + 2 * nbytes : reg.header_bytes + 3 * nbytes]
        src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
        dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        sm_src = torch.ones(nbytes // 2, dtype=torch.bfloat16, device=dev)
        sm_dst = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=dev)
        gemms = {
            "ag": (
                torch.randn(s, h, device=dev, dtype=torch.bfloat16),
                torch.randn(h, f // TP, device=dev, dtype=torch.bfloat16),
            ),
            "rs": (
                torch.randn(s, f // TP, device=dev, dtype=torch.bfloat16),
                torch.randn(f // TP, h, device=dev, dtype=torch.bfloat16),
            ),
        }
        for side, (a, b) in gemms.items():
            samples = _gemm_cases(
                a,
                b,
                [(d2h_s, host_out, src), (h2d_s, dst, host_in)],
                (sm_s, sm_src, sm_dst),
                main,
                reps,
            )
            res = {
                k: {part: median_ms(v) for part, v in parts.items() if v}
                for k, parts in samples.items()
            }
            alone = res["gemm_alone"]["gemm"]["median_ms"]
            res["gemm_slowdown_by_copy_engines"] = (
                res["gemm_with_copy_engines"]["gemm"]["median_ms"] / alone - 1
            )
            res["gemm_slowdown_by_sm_copy"] = (
                res["gemm_with_sm_copy"]["gemm"]["median_ms"] / alone - 1
            )
            res["copy_bytes_each_direction"] = nbytes
            res["gemm_shape"] = [a.shape[0], a.shape[1], b.shape[1]]
            out[f"{name}/{side}"] = res
            say(
                f"(b) {name} {side} GEMM {alone:.3f} ms alone; beside the copy engines "
                f"{res['gemm_slowdown_by_copy_engines']:+.1%}, beside an SM copy {res['gemm_slowdown_by_sm_copy']:+.1%}; "
                f"copies {res['copy_engines_alone']['side']['median_ms']:.3f} ms alone, "
                f"{res['gemm_with_copy_engines']['side']['median_ms']:.3f} beside the GEMM"
            )
        reg.close()
    return out


def _gemm_cases(a, b, copy_pairs, sm, main, reps: int) -> dict:
    """Round-robin samples (ms) of the GEMM `a @ b` alone, the copies alone, both at once, an SM
    copy of the same bytes alone and beside the GEMM: per case, the GEMM's time, the side's, both."""
    c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
    sm_s, sm_src, sm_dst = sm
    copies = [
        (stream, lambda d=d, s=s: d.copy_(s, non_blocking=True)) for stream, d, s in copy_pairs
    ]
    sm_copy = [(sm_s, lambda: (torch.mul(sm_src, 1, out=sm_dst), torch.mul(sm_dst, 1, out=sm_src)))]
    cases = {
        "gemm_alone": (True, []),
        "copy_engines_alone": (False, copies),
        "gemm_with_copy_engines": (True, copies),
        "sm_copy_alone": (False, sm_copy),
        "gemm_with_sm_copy": (True, sm_copy),
    }
    samples: dict = {k: {"gemm": [], "side": [], "both": []} for k in cases}
    for i in range(reps + 3):
        for k, (with_gemm, side_fns) in cases.items():
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            torch.cuda._sleep(SPIN_CYCLES)
            ev[0].record(main)
            side_ends = []
            for stream, fn in side_fns:
                stream.wait_stream(main)
                with torch.cuda.stream(stream):
                    fn()
                    e = torch.cuda.Event(enable_timing=True)
                    e.record(stream)
                    side_ends.append(e)
            if with_gemm:
                torch.mm(a, b, out=c)
            ev[1].record(main)
            for e in side_ends:
                main.wait_event(e)
            ev[2].record(main)
            ev[2].synchronize()
            if i >= 3:
                if with_gemm:
                    samples[k]["gemm"].append(ev[0].elapsed_time(ev[1]))
                if side_ends:
                    samples[k]["side"].append(max(ev[0].elapsed_time(e) for e in side_ends))
                samples[k]["both"].append(ev[0].elapsed_time(ev[2]))
    return samples


# ------------------------------------------------------------------------ (c) two processes, one GPU


def _rank_main(rank: int, world: int, port: int, out_dir: str, reps: int, gpus: int = 1) -> None:
    import datetime

    import torch.distributed as dist

    from tpscope.fusion.model.layers import AllGatherMatmulFn, MatmulReduceScatterFn
    from tpscope.fusion.ops.api import all_gather_matmul, matmul_reduce_scatter
    from tpscope.runfolder.fusion_choice import FusionChoice

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", rank % gpus)
    torch.cuda.set_device(dev)
    dist.init_process_group(
        "gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120)
    )
    res: dict = {"checks": {}, "timings": {}}

    def rel(a, b) -> float:
        return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))

    def inputs(seed: int, *shapes):  # every rank's tensors, drawn alike on every rank
        g = torch.Generator(device=dev).manual_seed(seed)
        return [
            [(torch.randn(*sh, generator=g, device=dev) * 0.1).bfloat16() for sh in shapes]
            for _ in range(world)
        ]

    # forward, both sides, several piece counts, three shapes (smallest first: the region is made
    # again, larger, on CUDA twice)
    for name, (s, h, f) in {
        "odd": (1536, 640, 1920),
        "8b": SHAPES["8b"],
        "ref": SHAPES["ref"],
    }.items():
        for k in PIECES:
            xs = inputs(k, (s // world, h), (h, f // world))
            w = xs[0][1]
            got = all_gather_matmul(xs[rank][0], w, mode="host_staged", chunks=k)
            ref = torch.cat([x[0] for x in xs]) @ w
            res["checks"][f"ag/{name}/k{k}"] = rel(got, ref)
            ys = inputs(100 + k, (s, f // world), (f // world, h))
            got = matmul_reduce_scatter(ys[rank][0], ys[rank][1], mode="host_staged", chunks=k)
            full = sum(y[0].float() @ y[1].float() for y in ys)
            res["checks"][f"rs/{name}/k{k}"] = rel(
                got, full[rank * (s // world) : (rank + 1) * (s // world)]
            )
    # backward of both layers (bwd overlap on), against gradients written out by hand
    s, h, f = 2048, 1024, 3072
    for k in (1, 2):
        t = inputs(
            7 + k,
            (s // world, h),
            (h, f // world),
            (s, f // world),
            (s, f // world),
            (f // world, h),
            (s // world, h),
        )
        x, w1, g1 = t[rank][0].requires_grad_(), t[rank][1].requires_grad_(), t[rank][2]
        y, w2, g2 = t[rank][3].requires_grad_(), t[rank][4].requires_grad_(), t[rank][5]
        fusion = FusionChoice(mode="host_staged", chunks=k)
        a = AllGatherMatmulFn.apply(x, w1, None, fusion, "chk.col")
        b = MatmulReduceScatterFn.apply(y, w2, None, fusion, "chk.row")
        torch.autograd.backward([a, b], [g1, g2])
        xa = torch.cat([r[0] for r in t]).float()
        rows = slice(rank * (s // world), (rank + 1) * (s // world))
        dx = sum(r[2].float() @ r[1].float().t() for r in t)[rows]
        g2all = torch.cat([r[5] for r in t]).float()
        res["checks"][f"bwd/k{k}/col_out"] = rel(a, xa @ w1.float())
        res["checks"][f"bwd/k{k}/col_dx"] = rel(x.grad, dx)
        res["checks"][f"bwd/k{k}/col_dw"] = rel(w1.grad, xa.t() @ g1.float())
        res["checks"][f"bwd/k{k}/row_dy"] = rel(y.grad, g2all @ w2.float().t())
        res["checks"][f"bwd/k{k}/row_dw"] = rel(w2.grad, y.float().t() @ g2all)
    # 30 calls queued back to back, checked afterwards
    worst = 0.0
    queued = []
    for i in range(30):
        s, h, f = ((4096, 2048, 3072), (8192, 4096, 7168), (2048, 1024, 1536))[i % 3]
        k = 1 + i % 2
        if i % 2:
            xs = inputs(1000 + i, (s // world, h), (h, f // world))
            queued.append(
                (
                    all_gather_matmul(xs[rank][0], xs[0][1], mode="host_staged", chunks=k),
                    lambda xs=xs: torch.cat([x[0] for x in xs]) @ xs[0][1],
                )
            )
        else:
            ys = inputs(2000 + i, (s, f // world), (f // world, h))
            sl = slice(rank * (s // world), (rank + 1) * (s // world))
            queued.append(
                (
                    matmul_reduce_scatter(ys[rank][0], ys[rank][1], mode="host_staged", chunks=k),
                    lambda ys=ys, sl=sl: sum(y[0].float() @ y[1].float() for y in ys)[sl],
                )
            )
    torch.cuda.synchronize()
    for got, ref in queued:
        worst = max(worst, rel(got, ref()))
    res["checks"]["back_to_back_30_worst"] = worst
    # timings (time-sliced GPU: proof of ordering, not speed)
    for name, (s, h, f) in SHAPES.items():
        g = torch.Generator(device=dev).manual_seed(rank)
        x = torch.randn(s // world, h, generator=g, device=dev).bfloat16()
        w = torch.randn(h, f // world, generator=g, device=dev).bfloat16()
        y = torch.randn(s, f // world, generator=g, device=dev).bfloat16()
        w2 = torch.randn(f // world, h, generator=g, device=dev).bfloat16()
        xg = torch.randn(s, h, generator=g, device=dev).bfloat16()
        fns = {
            "gemm_ag_alone": lambda xg=xg, w=w: xg @ w,
            "gemm_rs_alone": lambda y=y, w2=w2: y @ w2,
        }
        for k in PIECES:
            fns[f"ag/k{k}"] = lambda k=k, x=x, w=w: all_gather_matmul(
                x, w, mode="host_staged", chunks=k
            )
            fns[f"rs/k{k}"] = lambda k=k, y=y, w2=w2: matmul_reduce_scatter(
                y, w2, mode="host_staged", chunks=k
            )
        samples: dict = {key: [] for key in fns}
        for i in range(reps + 2):
            for key, fn in fns.items():
                torch.cuda.synchronize()
                dist.barrier()
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                fn()
                end.record()
                end.synchronize()
                if i >= 2:
                    samples[key].append(start.elapsed_time(end))
        res["timings"][name] = {key: median_ms(v) for key, v in samples.items()}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(res))
    dist.barrier()
    dist.destroy_process_group()


def part_two_processes(reps: int, timeout_s: float, gpus: int = 1) -> dict:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out_dir = tempfile.mkdtemp(prefix="host_staged_one_gpu-")
    ctx = mp.start_processes(
        _rank_main, args=(2, port, out_dir, reps, gpus), nprocs=2, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout_s
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                return {
                    "error": f"the two processes did not finish in {timeout_s:.0f} s (a hang in the ordering?)",
                    "partial": _read_ranks(out_dir),
                }
    except Exception as exc:  # noqa: BLE001 - a rank's failure is a result to record
        return {"error": str(exc)[-3000:], "partial": _read_ranks(out_dir)}
    return _read_ranks(out_dir)


def _read_ranks(out_dir: str) -> dict:
    return {p.stem: json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("rank*.json"))}


def _summary(result: dict) -> dict:
    """The headline numbers, each from the parts above (absent where a part failed)."""
    out: dict = {}
    shared = result.get("bandwidth", {}).get("shared_file", {})
    for size, cases in shared.items():
        out[f"gbps_{int(size) // 2**20}MiB"] = {k: round(v["gbps"], 1) for k, v in cases.items()}
    for key, res in result.get("contention", {}).items():
        if isinstance(res, dict) and "gemm_slowdown_by_copy_engines" in res:
            out[f"gemm_slowdown/{key}"] = {
                "copy_engines": round(res["gemm_slowdown_by_copy_engines"], 4),
                "sm_copy": round(res["gemm_slowdown_by_sm_copy"], 4),
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--two-process-timeout-s", type=float, default=150.0)
    parser.add_argument(
        "--gpus",
        type=int,
        choices=(1, 2),
        default=1,
        help="(c) on 1 GPU (both processes on GPU 0) or 2 (a GPU each: its times are the mode's)",
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("host_staged_one_gpu: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    result: dict = {
        "env": env_info(),
        "reps": args.reps,
        "shapes": SHAPES,
        "tp": TP,
        "gpus": args.gpus,
    }
    say(f"env {result['env']}")

    def save() -> None:
        result["wall_s"] = time.monotonic() - t0
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")

    for key, fn in (
        ("bandwidth", lambda: part_bandwidth(args.reps)),
        ("contention", lambda: part_contention(args.reps)),
        (
            "two_processes",
            lambda: part_two_processes(
                max(5, args.reps // 2), args.two_process_timeout_s, args.gpus
            ),
        ),
    ):
        say(f"part {key} ...")
        try:
            result[key] = fn()
        except Exception as exc:  # noqa: BLE001 - record the failure, go on with the next part
            result[key] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:],
            }
            say(f"part {key} failed: {type(exc).__name__}: {exc}")
        torch.cuda.synchronize()
        save()
        say(f"part {key} done ({time.monotonic() - t0:.0f} s); wrote {args.out}")
    tp_checks = result.get("two_processes", {})
    worst = max(
        (
            v
            for r in tp_checks.values()
            if isinstance(r, dict)
            for v in r.get("checks", {}).values()
        ),
        default=None,
    )
    result["summary"] = _summary(result)
    result["two_processes_worst_rel_err"] = worst
    result["two_processes_ok"] = worst is not None and worst <= TOLERANCE
    save()
    say(f"summary {json.dumps(result['summary'])}")
    say(
        f"two processes: worst relative error {worst} against {TOLERANCE} (bfloat16): "
        f"{'OK' if result['two_processes_ok'] else 'FAILED'}"
    )
    return 0 if result["two_processes_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
