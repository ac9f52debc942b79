"""The normalized, columnar tables of one rank's trace (metrics.md §1).

Every time is int64 absolute nanoseconds; names are int32 ids into `RankTrace.symbols`;
integer columns hold -1 where the trace has no value. Rows of `GpuActivities` are sorted by
start time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CPU_LANE_DEVICE = -1  # the device of a CPU run's lanes, one per CPU thread (metrics.md §1)


@dataclass(frozen=True, slots=True)
class GpuActivities:
    """Kernels, memcpys and memsets: one row each."""

    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    name_id: np.ndarray  # int32
    kind: np.ndarray  # int8, classify.ActivityKind
    cls: np.ndarray  # int8, classify.ActivityClass
    lane: np.ndarray  # int32, row of RankTrace.lanes
    correlation: np.ndarray  # int64
    launch_start_ns: np.ndarray  # int64, the CPU launch call (cuda_runtime / cuda_driver)
    launch_end_ns: np.ndarray  # int64
    launch_tid: np.ndarray  # int64, the CPU thread of the launch call (-1 when unknown)
    step: np.ndarray  # int64, step number (metrics.md §3: the step that launched it), -1 if none
    external_id: np.ndarray  # int64, of the launching CPU op
    signature_id: np.ndarray  # int32, "name|grid|block|input dims" (metrics.md §8)
    # the launching CPU op (External id join; -1 when absent), for GEMM shapes (metrics.md §8)
    grid: np.ndarray  # (n, 3) int64 launch grid, -1 where absent
    op_name_id: np.ndarray  # int32, e.g. "aten::mm"
    dims_id: np.ndarray  # int32, its raw `Input Dims` JSON
    types_id: np.ndarray  # int32, its raw `Input type` JSON
    strides_id: np.ndarray  # int32, its raw `Input Strides` JSON
    # collective metadata (metrics.md §5), from the kernel's args or its launching CPU op
    coll_name_id: np.ndarray  # int32, -1 when not a described collective
    pg_name_id: np.ndarray  # int32
    seq: np.ndarray  # int64
    in_nelems: np.ndarray  # int64
    out_nelems: np.ndarray  # int64
    dtype_id: np.ndarray  # int32
    group_size: np.ndarray  # int64
    pg_ranks_id: np.ndarray  # int32, "0,2,4" (global ranks of the group), -1 or "" when unknown
    pg_desc_id: np.ndarray  # int32, `Process Group Description` (TP, DP ...)
    peer: np.ndarray  # int64, the group-local peer of a send/recv (`Dst Rank` / `Src Rank`)
    # int32, "s1 r3": global peers this kernel sends to / receives from (§5), -1 if none
    p2p_id: np.ndarray

    def __len__(self) -> int:
        return len(self.start_ns)

    @property
    def dur_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def take(self, rows: np.ndarray) -> GpuActivities:
        """The same table restricted to `rows` (indices or a boolean mask)."""
        return GpuActivities(**{f: getattr(self, f)[rows] for f in self.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Ranges:
    """Annotations (record_function, ProfilerStep#N) on the CPU or on a GPU lane."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    name_id: np.ndarray
    on_gpu: np.ndarray  # bool
    lane: np.ndarray  # int32: a GPU lane, or -1 for CPU ranges
    tid: np.ndarray  # int64 CPU thread (symbol id for string tids), -1 on GPU

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class CpuCalls:
    """CPU ops (`cpu_op`) or CUDA/HIP runtime and driver calls of one rank: one row each, sorted by
    start. The critical path's CPU side (metrics.md §7) walks a thread's calls."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    name_id: np.ndarray  # int32
    tid: np.ndarray  # int64 CPU thread (string tids hashed, trace.read.extract.lane_number)
    external_id: np.ndarray  # int64, -1 when absent
    correlation: np.ndarray  # int64 (runtime calls), -1 for CPU ops

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class StreamWaits:
    """`cuda_sync` events: a stream waiting for an event recorded on another stream."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    name_id: np.ndarray
    lane: np.ndarray  # the waiting lane (-1 when unknown)
    wait_on_lane: np.ndarray  # the lane the event was recorded on (-1 when unknown)
    wait_on_event_corr: np.ndarray  # correlation id of the cudaEventRecord call (-1 when unknown)
    correlation: np.ndarray

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True, slots=True)
class StepWindows:
    """Per-step windows of one rank (metrics.md §3)."""

    step: np.ndarray  # int64 step number
    start_ns: np.ndarray
    end_ns: np.ndarray
    source: str  # "cpu_launch", "gpu_annotation" or "whole_trace" (metrics.md §3)

    def __len__(self) -> int:
        return len(self.step)


@dataclass(frozen=True, slots=True)
class RankTrace:
    """One rank's trace, normalized."""

    rank: int
    path: Path
    world_size: int | None
    hostname: str | None
    symbols: tuple[str, ...]
    lanes: np.ndarray  # (n_lanes, 2) int64: device, stream
    gpu: GpuActivities
    annotations: Ranges
    waits: StreamWaits
    steps: StepWindows
    cpu_ops: CpuCalls
    runtime: CpuCalls  # cuda_runtime / cuda_driver calls: launches, syncs, event records
    warnings: tuple[str, ...] = ()
    info: dict = field(default_factory=dict)  # nccl_version, device_name, distributed backend ...
    cpu_run: bool = False  # no GPU activity: `gpu` holds CPU threads' activities (metrics.md §1)

    def lane_label(self, lane: int) -> str:
        device, stream = self.lanes[lane]
        if device == CPU_LANE_DEVICE:
            return f"rank {self.rank} cpu thread {stream}"
        return f"rank {self.rank} gpu {device} stream {stream}"
