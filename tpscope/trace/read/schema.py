"""The fields of a Kineto (torch.profiler) trace that tpscope reads, as typed msgspec structs.

Decoding into these structs skips every other field in C, which is what makes loading fast
(docs/benchmarks.md). Fields whose types vary between producers are typed loosely.
"""

from __future__ import annotations

import msgspec

from tpscope.trace.read.fields import ARGS, Arg

Number = int | float


# the Python type of each kind of argument (fields.KINDS)
TYPE_OF_KIND = {
    "int": int | None,
    "str": str | None,
    "int_or_str": int | str | None,
    "raw": msgspec.Raw,
    "dims": list[int] | None,
    "ranks": str | list[int] | None,
}


def args_struct(args: tuple[Arg, ...] = ARGS) -> type[msgspec.Struct]:
    """The `args` of an event as a msgspec struct: only the keys of the table (fields.py)."""
    return msgspec.defstruct(
        "Args",
        [
            (
                a.attr,
                TYPE_OF_KIND[a.kind],
                msgspec.field(
                    name=a.key if a.key != a.attr else None,
                    default=msgspec.Raw() if a.kind == "raw" else None,
                ),
            )
            for a in args
        ],
        gc=False,
        module=__name__,
    )


Args = args_struct()


class Event(msgspec.Struct, gc=False):
    """One entry of `traceEvents`."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Number | None = None
    dur: Number | None = None
    args: Args | None = None  # type: ignore[valid-type]


class DistributedInfo(msgspec.Struct, gc=False):
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    nccl_version: str | None = None
    pg_count: int | None = None
    pg_config: msgspec.Raw = msgspec.Raw()


class TraceFile(msgspec.Struct, gc=False):
    """A Kineto trace file's top level."""

    traceEvents: list[Event] = []
    distributedInfo: DistributedInfo | None = None
    baseTimeNanoseconds: int | None = None
    deviceProperties: msgspec.Raw = msgspec.Raw()
    hostname: str | None = None
