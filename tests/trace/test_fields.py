"""The field table (`read/fields.py`): the C reader's key table is generated from it and current,
and a field added to the table alone reaches the columns, with either reader."""

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from tpscope.trace.read import fields
from tpscope.trace.read.schema import Args

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_c_header_is_generated_from_the_table():
    assert fields.HEADER.read_text() == fields.header_text(), (
        "run `python3 -m tpscope.trace.read.fields` after editing the table"
    )


def test_the_schema_is_the_table():
    import msgspec

    got = [(f.encode_name, f.name) for f in msgspec.structs.fields(Args)]
    assert got == [(a.key, a.attr) for a in fields.ARGS]


def test_every_length_of_key_has_room_for_its_terminator():
    # three keys of 10 characters once filled a fixed row of four; five more are planted here
    planted = (*fields.ARGS, *(fields.Arg(f"abcdefghi{k}", f"x{k}", "int") for k in range(5)))
    text = fields.header_text(planted)
    start = text.index("KEYS_OF_LEN[MAX_KEY_LEN + 1]")
    rows = text[start:].split("{", 1)[1].split("};", 1)[0].strip().splitlines()
    table = [[int(x) for x in r.strip().rstrip(",").strip("{}").split(", ")] for r in rows]
    for n, row in enumerate(table):
        listed = row[: row.index(-1)]
        assert listed == [k for k, a in enumerate(planted) if len(a.key) == n], n
        assert row[-1] == -1, n
    assert len(table[10]) == 3 + 5 + 1  # Input Dims, Input type, Group size, the planted five


PLANTED = """
import importlib, json, sys
import numpy as np
import tpscope.trace.read.fields as f

PLANTED_ARGS = (
    f.Arg("Sequence number", "sequence_number", "int", ("cpu_op", "launch")),
    f.Arg("Planted Raw", "planted_raw", "raw", ("cpu_op",), "planted_id"),
)

f.ARGS = (*f.ARGS, *PLANTED_ARGS)
from tpscope.trace.read import schema, decode, extract, native, stream
for m in (schema, decode, extract, native, stream):
    importlib.reload(m)
if len(sys.argv) > 2:  # the C reader built with the planted table's header
    f.write_header(__import__("pathlib").Path(sys.argv[2]) / "_event_fields.h")
    spec = importlib.util.spec_from_file_location("tpscope.trace._event_columns", sys.argv[3])
    native._event_columns = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native._event_columns)
text = open(sys.argv[1], "rb").read()
c = native.extract_text(text, 1, len(text) - 1)
m = extract.extract(decode.EVENTS_DECODER.decode(text), 0)
out = {}
for name, raw in (("c", c), ("msgspec", m)):
    if raw is not None:
        out[name] = {g: raw.groups[g]["sequence_number"].tolist() for g in ("cpu_op", "launch")}
        out[name]["gpu"] = "sequence_number" in raw.groups["gpu"]
        out[name]["planted"] = [raw.symbols[i] for i in raw.groups["cpu_op"]["planted_id"]]
print(json.dumps(out))
"""


def test_a_field_planted_in_the_table_reaches_the_columns(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2,
         "args": {"Sequence number": 41, "External id": 1, "Planted Raw": ["", "2"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 4, "dur": 2, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 1,
         "args": {"Sequence number": 7, "correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 1,
         "args": {"Sequence number": 9, "correlation": 3}},
    ]  # fmt: skip
    trace = tmp_path / "events.json"
    trace.write_text(json.dumps(events))
    # the expected columns, from the raw JSON: per group in trace order, -1 where absent
    expected = {"cpu_op": [41, -1], "launch": [7], "gpu": False, "planted": ['["", "2"]', ""]}
    script = tmp_path / "planted.py"
    script.write_text(textwrap.dedent(PLANTED))
    # the C reader built in a folder of its own, with the header of the planted table
    build = tmp_path / "build"
    build.mkdir()
    (build / "_event_columns.c").write_text(
        (ROOT / "tpscope" / "trace" / "_event_columns.c").read_text()
    )
    header = subprocess.run(
        [sys.executable, "-c", PLANTED.split("from tpscope.trace.read import")[0]
         + f"f.write_header(__import__('pathlib').Path({str(build)!r}) / '_event_fields.h')"],
        cwd=ROOT, check=True, timeout=120,
    )  # fmt: skip
    assert header.returncode == 0
    so = build / ("_event_columns" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", f"-I{ROOT / 'third_party' / 'yyjson'}",
         f"-I{sysconfig.get_paths()['include']}", str(build / "_event_columns.c"),
         str(ROOT / "third_party" / "yyjson" / "yyjson.c"), "-o", str(so)],
        check=True, timeout=300,
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(script), str(trace), str(build), str(so)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got == {"c": expected, "msgspec": expected}
