"""The fields of a Kineto (torch.profiler) trace that tpscope reads, as typed msgspec structs.

Decoding into these structs skips every other field in C, which is what makes loading fast
(docs/benchmarks.md). Fields whose types vary between producers are typed loosely.
"""

from __future__ import annotations

import msgspec

Number = int | float


class Args(msgspec.Struct, gc=False):
    """The `args` of an event: only the keys some metric uses."""

    device: int | str | None = None
    stream: int | str | None = None
    correlation: int | None = None
    external_id: int | None = msgspec.field(name="External id", default=None)
    collective: str | None = msgspec.field(name="Collective name", default=None)
    in_nelems: int | None = msgspec.field(name="In msg nelems", default=None)
    out_nelems: int | None = msgspec.field(name="Out msg nelems", default=None)
    dtype: str | None = None
    pg_name: str | None = msgspec.field(name="Process Group Name", default=None)
    group_size: int | None = msgspec.field(name="Group size", default=None)
    seq: int | None = msgspec.field(name="Seq", default=None)
    pg_ranks: str | list[int] | None = msgspec.field(name="Process Group Ranks", default=None)
    pg_desc: str | None = msgspec.field(name="Process Group Description", default=None)
    # recv: the group-local peer
    src_rank: int | None = msgspec.field(name="Src Rank", default=None)
    # send: the group-local peer
    dst_rank: int | None = msgspec.field(name="Dst Rank", default=None)
    grid: list[int] | None = None
    block: list[int] | None = None
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw())
    # GEMM dtype (§8)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=msgspec.Raw())
    # GEMM layout
    input_strides: msgspec.Raw = msgspec.field(name="Input Strides", default=msgspec.Raw())
    # cuda_sync events (cudaStreamWaitEvent and friends)
    wait_on_stream: int | None = None
    wait_on_event_corr: int | None = msgspec.field(
        name="wait_on_cuda_event_record_corr_id", default=None
    )
    name: str | None = None  # metadata events: process_name / thread_name / hostname


class Event(msgspec.Struct, gc=False):
    """One entry of `traceEvents`."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Number | None = None
    dur: Number | None = None
    args: Args | None = None


class DistributedInfo(msgspec.Struct, gc=False):
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    nccl_version: str | None = None
    pg_config: msgspec.Raw = msgspec.Raw()


class TraceFile(msgspec.Struct, gc=False):
    """A Kineto trace file's top level."""

    traceEvents: list[Event] = []
    distributedInfo: DistributedInfo | None = None
    baseTimeNanoseconds: int | None = None
    deviceProperties: msgspec.Raw = msgspec.Raw()
    hostname: str | None = None
