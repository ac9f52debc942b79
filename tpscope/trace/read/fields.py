"""The one table of the event arguments tpscope reads. Everything else is derived from it: the
msgspec schema (`schema.Args`), the C reader's key table (`tpscope/trace/_event_fields.h`, written
by `write_header`, checked by a test) and, for the plain arguments, the columns of each event group
(`extract.py` with msgspec, `native.py` with the C reader).

A plain argument (an integer, `PLAIN_KINDS`) given `groups` becomes an int64 column in each of
those groups, -1 where absent; a raw one (its exact JSON text, as `Input Dims`) a column of symbol
ids, "" where absent. Adding one is one row here (and `python3 -m tpscope.trace.read.fields` to
write the header again). The other kinds are read by rules of their own: lanes (device, stream),
launch dimensions, collective metadata.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

# kind -> the C reader's code for it (`read_args` in _event_columns.c)
KINDS = {
    "int": 0,  # int | None
    "str": 1,  # str | None
    "int_or_str": 2,  # int | str | None: device, stream (ROCm writes "0x0")
    "raw": 3,  # the value's exact JSON text (msgspec.Raw)
    "dims": 4,  # list[int] | None: grid, block
    "ranks": 5,  # str | list[int] | None: Process Group Ranks
}
PLAIN_KINDS = ("int",)


@dataclass(frozen=True, slots=True)
class Arg:
    """One key of an event's `args`."""

    key: str  # as the trace spells it
    attr: str  # the schema's attribute; the column's name for a plain argument
    kind: str  # a key of KINDS
    groups: tuple[str, ...] = ()  # plain and raw arguments: the event groups with its column
    column: str = ""  # the column's name (default: `attr`; a raw argument's holds symbol ids)

    @property
    def column_name(self) -> str:
        return self.column or self.attr


ARGS: tuple[Arg, ...] = (
    Arg("device", "device", "int_or_str"),
    Arg("stream", "stream", "int_or_str"),
    Arg("correlation", "correlation", "int", ("gpu", "launch", "sync")),
    Arg("External id", "external_id", "int", ("launch", "cpu_op")),
    Arg("Collective name", "collective", "str"),
    Arg("In msg nelems", "in_nelems", "int"),
    Arg("Out msg nelems", "out_nelems", "int"),
    Arg("dtype", "dtype", "str"),
    Arg("Process Group Name", "pg_name", "str"),
    Arg("Group size", "group_size", "int"),
    Arg("Seq", "seq", "int"),
    Arg("Process Group Ranks", "pg_ranks", "ranks"),
    Arg("Process Group Description", "pg_desc", "str"),
    Arg("Src Rank", "src_rank", "int"),  # recv: the group-local peer
    Arg("Dst Rank", "dst_rank", "int"),  # send: the group-local peer
    Arg("grid", "grid", "dims"),
    Arg("block", "block", "dims"),
    Arg("Input Dims", "input_dims", "raw", ("cpu_op", "cpu_range"), "dims_id"),
    Arg("Input type", "input_type", "raw", ("cpu_op", "cpu_range"), "types_id"),  # GEMM dtype
    Arg("Input Strides", "input_strides", "raw", ("cpu_op",), "strides_id"),  # GEMM layout
    # scalar arguments as text (c10d::send's and recv_'s peer, metrics.md §5)
    Arg("Concrete Inputs", "concrete_inputs", "raw", ("cpu_op",), "concrete_id"),
    # cuda_sync events (cudaStreamWaitEvent and friends)
    Arg("wait_on_stream", "wait_on_stream", "int", ("sync",)),
    Arg("wait_on_cuda_event_record_corr_id", "wait_on_event_corr", "int", ("sync",)),
    Arg("name", "name", "str"),  # metadata events: process_name / thread_name / hostname
)
# the collective metadata's arguments: read only where `Collective name` is a string
COLLECTIVE_ARGS = ("collective", "in_nelems", "out_nelems", "dtype", "pg_name", "group_size")
COLLECTIVE_ARGS += ("seq", "pg_ranks", "pg_desc", "src_rank", "dst_rank")


def plain_args(args: tuple[Arg, ...] | None = None) -> list[Arg]:
    """The plain arguments that some group keeps as a column."""
    return [a for a in (ARGS if args is None else args) if a.kind in PLAIN_KINDS and a.groups]


def plain_columns(group: str, args: tuple[Arg, ...] | None = None) -> list[str]:
    """The plain argument columns of one event group, in table order."""
    return [a.column_name for a in plain_args(args) if group in a.groups]


def raw_args(args: tuple[Arg, ...] | None = None) -> list[Arg]:
    """The arguments kept as their JSON text (a column of symbol ids, "" where absent)."""
    return [a for a in (ARGS if args is None else args) if a.kind == "raw" and a.groups]


def raw_columns(group: str, args: tuple[Arg, ...] | None = None) -> list[Arg]:
    """The raw arguments with a column in one event group, in table order."""
    return [a for a in raw_args(args) if group in a.groups]


HEADER = Path(__file__).resolve().parent.parent / "_event_fields.h"


def header_text(args: tuple[Arg, ...] | None = None) -> str:
    """The C reader's key table: an enum of the arguments, their keys and kinds, the keys of each
    length (for the lookup), and the dense columns of the plain arguments."""
    args = ARGS if args is None else args
    keys = [a.key.encode() for a in args]
    max_len = max(map(len, keys))
    per_len = [[k for k, key in enumerate(keys) if len(key) == n] for n in range(max_len + 1)]
    width = max(map(len, per_len)) + 1  # room for the -1 that ends each list
    plain = plain_args(args)
    raw = raw_args(args)
    lines = [
        "/* Generated from tpscope/trace/read/fields.py by `python3 -m tpscope.trace.read.fields`:",
        " * do not edit (tests/trace/test_fields.py checks that it is current). */",
        "#ifndef TPSCOPE_EVENT_FIELDS_H",
        "#define TPSCOPE_EVENT_FIELDS_H",
        "",
        "enum {",
        *(f"    A_{a.attr.upper()}," for a in args),
        "    N_ARG_KEYS",
        "};",
        "",
        "/* The argument keys read: name, length, bit (the enum above), kind */",
        "typedef struct {",
        "    const char *name;",
        "    size_t len;",
        "    int bit, kind;",
        "} ArgKey;",
        "static const ArgKey ARG_KEYS[N_ARG_KEYS] = {",
        *(
            f"    {{{_c_string(key)}, {len(key)}, A_{a.attr.upper()}, {KINDS[a.kind]}}},"
            for a, key in zip(args, keys)
        ),
        "};",
        "",
        f"#define MAX_KEY_LEN {max_len}",
        "/* Per key length, the ARG_KEYS of that length, -1 after the last */",
        f"static const signed char KEYS_OF_LEN[MAX_KEY_LEN + 1][{width}] = {{",
        *(
            "    {" + ", ".join(str(k) for k in [*ks, *([-1] * (width - len(ks)))]) + "},"
            for ks in per_len
        ),
        "};",
        "",
        "/* The plain arguments kept as dense int64 columns: their arguments and column names */",
        f"#define N_PLAIN {len(plain)}",
        "static const int PLAIN_ARGS[N_PLAIN + 1] = {"
        + "".join(f"A_{a.attr.upper()}, " for a in plain)
        + "-1};",
        "static const char *PLAIN_NAMES[N_PLAIN + 1] = {"
        + "".join(f'"{a.column_name}", ' for a in plain)
        + "0};",
        "/* The raw arguments kept as dense int32 columns of symbol ids (their text) */",
        f"#define N_RAW {len(raw)}",
        "static const int RAW_ARGS[N_RAW + 1] = {"
        + "".join(f"A_{a.attr.upper()}, " for a in raw)
        + "-1};",
        "static const char *RAW_NAMES[N_RAW + 1] = {"
        + "".join(f'"{a.column_name}", ' for a in raw)
        + "0};",
        "",
        "#endif",
        "",
    ]
    return "\n".join(lines)


def _c_string(key: bytes) -> str:
    return (
        '"'
        + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\?' else f"\\{b:03o}" for b in key)
        + '"'
    )


def write_header(path: Path = HEADER, args: tuple[Arg, ...] | None = None) -> None:
    path.write_text(header_text(args))


if __name__ == "__main__":  # pragma: no cover - run by hand after editing the table
    write_header(Path(sys.argv[1]) if len(sys.argv) > 1 else HEADER)
