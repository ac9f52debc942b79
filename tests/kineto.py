"""Build small Kineto (torch.profiler) traces with intervals you choose, for tests.

Times are given in µs relative to the trace start; the writer adds `baseTimeNanoseconds` like
torch 2.11 does (or writes absolute integer µs like old traces with `old_format=True`).

    r0 = RankTrace(0)
    r0.kernel("gemm", 0, 100)                       # compute on stream 7
    r0.kernel("ncclDevKernel_AllGather", 50, 100, stream=14,
              collective=Collective("_allgather_base", in_nelems=4, out_nelems=8))
    write_run(tmp_path / "run", [r0, r1])
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

BASE_NS = 1_790_000_000_000_000_000
OLD_BASE_US = 1_700_000_000_000_000  # absolute µs of old traces


@dataclass
class Collective:
    name: str = "_allgather_base"
    in_nelems: int = 1024
    out_nelems: int = 2048
    dtype: str = "BFloat16"
    pg: str = "0"
    group_size: int = 2
    seq: int | None = None
    on_kernel: bool = False  # metadata in the kernel's args (newer torch) instead of the CPU op's

    def args(self) -> dict:
        a = {
            "Collective name": self.name,
            "In msg nelems": self.in_nelems,
            "Out msg nelems": self.out_nelems,
            "dtype": self.dtype,
            "Process Group Name": self.pg,
            "Group size": self.group_size,
        }
        if self.seq is not None:
            a["Seq"] = self.seq
        return a


class RankTrace:
    """Events of one rank's trace."""

    def __init__(
        self,
        rank: int | None,
        world_size: int = 2,
        device: int | None = None,
        hostname: str | None = None,
        pg_config: list[dict] | None = None,
    ) -> None:
        self.rank = rank
        self.pg_config = (
            pg_config
            if pg_config is not None
            else [{"pg_name": "0", "ranks": list(range(world_size))}]
        )
        self.world_size = world_size
        self.device = rank if device is None and rank is not None else (device or 0)
        self.hostname = hostname
        self.events: list[dict] = []
        self._corr = 1000
        self._ext = 1

    # ---- GPU activities -------------------------------------------------------------
    def kernel(
        self,
        name: str,
        start_us: float,
        dur_us: float,
        stream: int = 7,
        *,
        cat: str = "kernel",
        launch_us: tuple[float, float] | None = None,
        collective: Collective | None = None,
        grid=(1, 1, 1),
        block=(128, 1, 1),
        input_dims: list | None = None,
        cpu_op: str = "aten::mm",
        input_type: list | None = None,
    ) -> int:
        """A GPU activity; with `launch_us=(ts, dur)` also its CPU launch call (correlation id)."""
        self._corr += 1
        corr = self._corr
        args = {"device": self.device, "stream": stream, "correlation": corr}
        if cat == "kernel":
            args.update({"grid": list(grid), "block": list(block)})
        if collective is not None and collective.on_kernel:
            args.update(collective.args())
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.device,
                "tid": stream,
                "ts": start_us,
                "dur": dur_us,
                "args": args,
            }
        )
        if (
            launch_us is not None
            or (collective is not None and not collective.on_kernel)
            or input_dims is not None
        ):
            ts, dur = launch_us if launch_us is not None else (start_us - 5.0, 1.0)
            self._ext += 1
            ext = self._ext
            op_args = {"External id": ext}
            if collective is not None and not collective.on_kernel:
                op_name = "record_param_comms"
                op_args.update(collective.args())
            else:
                op_name = cpu_op
            if input_dims is not None:
                op_args["Input Dims"] = input_dims
            if input_type is not None:
                op_args["Input type"] = input_type
            self.events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": op_name,
                    "pid": 100,
                    "tid": 100,
                    "ts": ts - 0.5,
                    "dur": dur + 1.0,
                    "args": op_args,
                }
            )
            self.events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 100,
                    "tid": 100,
                    "ts": ts,
                    "dur": dur,
                    "args": {"correlation": corr, "External id": ext},
                }
            )
        return corr

    def p2p_batch(
        self,
        start_us: float,
        dur_us: float,
        ops: list[tuple[str, int, int]],
        ranks: list[int],
        pg: str = "0",
        stream: int = 20,
    ) -> int:
        """One `ncclDevKernel_SendRecv` kernel launched after `record_param_comms` send/recv ops
        `(\"send\" | \"recv\", group-local peer, nelems)`, as torch's batch_isend_irecv records them."""
        launch = start_us - 20.0
        for k, (kind, peer, nelems) in enumerate(ops):
            self._ext += 1
            args = {
                "External id": self._ext,
                "Collective name": kind,
                "Process Group Name": pg,
                "Process Group Ranks": str(ranks),
                "Group size": len(ranks),
                "dtype": "BFloat16",
                "In msg nelems": nelems,
                "Out msg nelems": nelems,
                ("Dst Rank" if kind == "send" else "Src Rank"): peer,
            }
            self.events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "record_param_comms",
                    "pid": 100,
                    "tid": 100,
                    "ts": launch - 10.0 + k,
                    "dur": 0.5,
                    "args": args,
                }
            )
        self._corr += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 100,
                "tid": 100,
                "ts": launch,
                "dur": 1.0,
                "args": {"correlation": self._corr, "External id": 1},
            }
        )
        self.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage)",
                "pid": self.device,
                "tid": stream,
                "ts": start_us,
                "dur": dur_us,
                "args": {"device": self.device, "stream": stream, "correlation": self._corr},
            }
        )
        return self._corr

    def memcpy(self, name: str, start_us: float, dur_us: float, stream: int = 7, **kw) -> int:
        return self.kernel(name, start_us, dur_us, stream, cat="gpu_memcpy", **kw)

    def memset(self, start_us: float, dur_us: float, stream: int = 7, **kw) -> int:
        return self.kernel("Memset (Device)", start_us, dur_us, stream, cat="gpu_memset", **kw)

    # ---- annotations ---------------------------------------------------------------
    def gpu_annotation(self, name: str, start_us: float, dur_us: float, stream: int = 7) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": name,
                "pid": self.device,
                "tid": stream,
                "ts": start_us,
                "dur": dur_us,
                "args": {},
            }
        )

    def cpu_annotation(self, name: str, start_us: float, dur_us: float, tid: int = 100) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": name,
                "pid": 100,
                "tid": tid,
                "ts": start_us,
                "dur": dur_us,
                "args": {},
            }
        )

    def stream_wait(
        self, start_us: float, stream: int, wait_on_stream: int, event_corr: int
    ) -> None:
        """A `cuda_sync` Stream Wait Event: `stream` waits for the event recorded by `event_corr`."""
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Wait Event",
                "pid": self.device,
                "tid": stream,
                "ts": start_us,
                "dur": 0,
                "args": {
                    "device": self.device,
                    "stream": stream,
                    "wait_on_stream": wait_on_stream,
                    "wait_on_cuda_event_record_corr_id": event_corr,
                },
            }
        )

    def raw(self, event: dict) -> None:
        self.events.append(event)

    # ---- output ----------------------------------------------------------------------
    def document(self, old_format: bool = False) -> dict:
        events = [dict(e) for e in self.events]
        doc: dict = {"schemaVersion": 1}
        if old_format:
            for e in events:
                if "ts" in e:
                    e["ts"] = int(round(OLD_BASE_US + e["ts"]))
                if "dur" in e:
                    e["dur"] = int(round(e["dur"]))
        else:
            doc["baseTimeNanoseconds"] = BASE_NS
        if self.rank is not None:
            doc["distributedInfo"] = {
                "backend": "nccl",
                "rank": self.rank,
                "world_size": self.world_size,
                "pg_config": self.pg_config,
            }
        if self.hostname is not None:
            doc["hostname"] = self.hostname
        doc["traceEvents"] = events
        return doc

    def write(self, path: Path, gz: bool = True, old_format: bool = False) -> Path:
        data = json.dumps(self.document(old_format)).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(data) if gz else data)
        return path


def write_run(
    folder: Path,
    ranks: list[RankTrace],
    manifest: dict | None = None,
    gz: bool = True,
    old_format: bool = False,
) -> Path:
    """A run folder named like tensorboard_trace_handler's output, one file per rank."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(ranks):
        suffix = ".pt.trace.json.gz" if gz else ".pt.trace.json"
        r.write(folder / f"rank{i}.{1000 + i}{suffix}", gz=gz, old_format=old_format)
    if manifest is not None:
        (folder / "tpscope_run.jsonc").write_text(json.dumps(manifest))
    return folder


def late_all_gather_ranks(late_us: float = 40.0) -> list[RankTrace]:
    """Two ranks of one step: a GEMM, then one all-gather that rank 1 reaches `late_us` late
    (it ran a longer GEMM), so rank 0's all-gather waits `late_us` for it (metrics.md §5)."""
    ranks = []
    for rank, late in ((0, 0.0), (1, late_us)):
        r = RankTrace(rank)
        r.gpu_annotation("ProfilerStep#1", 0, 400)
        r.kernel("gemm", 0, 50 + late)
        r.kernel(
            "ncclDevKernel_AllGather",
            60 + late,
            100 - late if rank else 140,
            stream=14,
            collective=Collective(
                "_allgather_base", in_nelems=4, out_nelems=8, seq=1, on_kernel=True
            ),
        )
        ranks.append(r)
    return ranks


def run_ahead_rank(n_steps: int = 6) -> RankTrace:
    """One rank whose CPU loop runs ahead of its GPU (metrics.md §3), in whole µs: the CPU's
    `ProfilerStep#N` lasts 20 µs and launches a prefetch copy on side stream 9 (5 µs, running at
    once, while earlier steps' kernels still run), a 26 µs GEMM on stream 7 (back to back: the GPU
    is the bottleneck, a step ends every 26 µs) and a 10 µs all-reduce on stream 14 beside it.
    Step N's GEMM runs [26(N-1) + 10, 26N + 10)."""
    r = RankTrace(0, world_size=1)
    for n in range(1, n_steps + 1):
        cpu = 20 * (n - 1)
        gpu = 26 * (n - 1) + 10
        r.cpu_annotation(f"ProfilerStep#{n}", cpu, 20)
        r.memcpy("Memcpy HtoD (Pinned -> Device)", cpu + 3, 5, stream=9, launch_us=(cpu + 1, 1))
        r.kernel("gemm", gpu, 26, stream=7, launch_us=(cpu + 5, 1))
        r.kernel(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            gpu + 5,
            10,
            stream=14,
            launch_us=(cpu + 8, 1),
        )
    return r


def raw_gpu_ticks(doc: dict) -> dict[str, set[int]]:
    """Brute force from a trace's raw JSON with whole-µs times: per class (`compute`, `comm`,
    `memory`), the set of µs ticks its GPU activities cover (metrics.md §2, by name and category)."""
    out: dict[str, set[int]] = {"compute": set(), "comm": set(), "memory": set()}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        cls = (
            "comm"
            if e["name"].lower().startswith("nccl")
            else "memory"
            if e["cat"] != "kernel"
            else "compute"
        )
        out[cls] |= set(range(int(e["ts"]), int(e["ts"] + e["dur"])))
    return out
