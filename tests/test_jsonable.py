"""metrics.md §10: one rule turns results into JSON values; NaN and infinities are null."""

from __future__ import annotations

import dataclasses
import json
import pickle
import random
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np
import pytest

from tpscope import jsonable
from tpscope.jsonable import dumps, plain
from tpscope.metrics import Summary, analyze_run, as_json
from tpscope.metrics.analysis import json_fields
from tpscope.trace import load_run

ROOT = Path(__file__).resolve().parents[1]


class Kind(Enum):
    A = "a"


@dataclass(frozen=True)
class Inner:
    ratio: float | None
    kind: Kind


@dataclass(frozen=True)
class Outer:
    inner: Inner
    by_rank: dict
    values: tuple
    array: np.ndarray
    count: np.int64


def test_every_shape_becomes_plain_json():
    value = Outer(
        inner=Inner(np.float64("nan"), Kind.A),
        by_rank={0: float("inf"), 1: np.float32(0.5)},
        values=(1, float("-inf"), np.int32(3)),
        array=np.array([1.5, np.nan]),
        count=np.int64(7),
    )
    want = {
        "inner": {"ratio": None, "kind": "a"},
        "by_rank": {"0": None, "1": 0.5},
        "values": [1, None, 3],
        "array": [1.5, None],
        "count": 7,
    }
    got = plain(value)
    assert got == want
    assert json.dumps(got, allow_nan=False)  # nothing non-standard is left
    assert type(got["count"]) is int and type(got["by_rank"]["1"]) is float


def test_a_dataclass_class_is_left_alone():
    assert plain(Inner) is Inner


def test_the_analyzer_document_follows_the_rule():
    """A numpy NaN in a result is null in `tpscope analyze --json` as a Python NaN is."""
    from tpscope.metrics import RunAnalysis, as_json

    summary = dataclasses.replace(
        Summary(None, None, None, None),
        step_time_us=np.float64("nan"),
        exposed_comm_ratio=float("nan"),
        tokens_per_s=np.float64(2.5),
    )
    doc = as_json(
        RunAnalysis(
            run_dir="r",
            ranks=[0],
            warnings=[],
            steps=[],
            summary=summary,
            clock_offsets_us={0: np.float64(1.0)},
        )
    )
    assert doc["summary"]["step_time_us"] is None and doc["summary"]["exposed_comm_ratio"] is None
    assert doc["summary"]["tokens_per_s"] == 2.5 and doc["clock_offsets_us"] == {"0": 1.0}
    assert json.dumps(doc, allow_nan=False)


@dataclass(frozen=True)
class TextInner:
    x: float
    names: tuple = ()


@dataclass(frozen=True)
class TextOuter:
    a: list
    b: dict = field(default_factory=dict)
    c: TextInner | None = None


def test_dumps_writes_floats_strings_and_scalars_are_written_as_json_dumps_writes_them():
    rng = random.Random(7)
    floats = [
        0.0,
        -0.0,
        1e16,
        1e15,
        9.999e15,
        1e-4,
        9e-5,
        1e-5,
        5e-324,
        1.7976931348623157e308,
        123456789.125,
        float("nan"),
        float("inf"),
        -float("inf"),
    ]
    floats += [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(3000)]
    strings = [
        "",
        "plain",
        'quote " back \\ slash /',
        "\x00\x01\x1f\x7f\x80\x9f",
        "é × §",
        "\u2028\u2029",
        "\U0001f600 astral",
        "tab\tnew\nline\rcr\bback\fform",
        "1e5",
        "0.00001,\n",
    ]
    doc = {
        "floats": floats,
        "ints": [0, -1, 2**62, -(2**63), np.int64(5), np.int32(-7)],
        "numpy": [np.float64(1e-7), np.float32(0.5), np.bool_(True)],
        "strings": strings,
        "keys": {s: k for k, s in enumerate(strings)},
        "nested": [
            TextOuter(
                [1.5e-9, TextInner(2e20, ("a", "b"))], {"k": [], "m": {}}, TextInner(float("nan"))
            )
        ],
        "empty": [[], {}, None, True, False],
    }
    want = json.dumps(plain(doc), indent=1)
    assert dumps(doc) == want
    # the text is searched a block at a time: blocks of a few bytes put a block's edge through
    # every kind of number and character
    for block in (1, 2, 3, 5, 64):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(jsonable, "_BLOCK_BYTES", block)
            assert dumps(doc) == want, block


def test_dumps_writes_a_real_analysis_as_json_dumps_does():
    analysis = analyze_run(load_run(ROOT / "tests" / "data" / "h200-shm-chunked4", workers=1))
    assert dumps(json_fields(analysis)) == json.dumps(as_json(analysis), indent=1)


def test_an_encoded_value_is_written_as_json_dumps_writes_the_value():
    """A value given with its text (`Encoded`, as a worker process writes a critical path's
    segments) comes out where it sits, indented to its depth, as `json.dumps` writes the
    document holding the value itself, at any depth, in a dict or a list, empty or not."""
    rng = random.Random(11)
    records = [
        {"start_us": rng.uniform(0, 1) * 10 ** rng.randint(-8, 18), "name": "é \x01 x", "n": k}
        for k in range(50)
    ]
    values = [records, [], {}, {"k": [1.5e-9, {"z": [None, "1e5"]}]}, [[1, [2]], 3]]
    doc = {
        "top": [jsonable.Encoded(v, dumps(v)) for v in values],
        "nested": TextOuter(
            [jsonable.Encoded(records, dumps(records))], {"deep": jsonable.Encoded({}, "{}")}
        ),
        "after": [TextInner(1e-7, ("a",))],
    }
    want = json.dumps(plain(doc), indent=1)
    assert want == json.dumps(
        {
            "top": values,
            "nested": {"a": [records], "b": {"deep": {}}, "c": None},
            "after": [{"x": 1e-7, "names": ["a"]}],
        },
        indent=1,
    )
    assert dumps(doc) == want


def _columns(n: int, seed: int) -> tuple[list, list[dict]]:
    """Random record columns and, built independently with Python's floats, their dicts."""
    rng = np.random.default_rng(seed)
    # whole ns over every magnitude up to 15 digits, negative ones, zero and the edges of a µs
    ns = (rng.integers(0, 10**15, n) // 10 ** rng.integers(0, 15, n)).astype(np.int64)
    ns[: min(n, 8)] = [0, 1, 999, 1000, 1001, 10**15 - 1, 100, 120][: min(n, 8)]
    back = -rng.integers(0, 10**7, n)
    pick = rng.integers(0, 4, n)
    values = ["plain", "é \u2028 \U0001f600", 'q"\\\n\t', ""]
    flag = rng.integers(0, 2, n)
    small = rng.integers(0, 3, n)
    fields = [
        ("start_us", jsonable.MicrosOfNs(ns)),
        ("name", jsonable.Coded(pick, values)),
        ("dur_us", jsonable.MicrosOfNs(back)),
        ("inferred", jsonable.Coded(flag, (False, True))),
        ("rank", jsonable.Coded(small, [0, -7, None])),
        ("x", jsonable.Coded(small, [1.5, 2e-05, 1e16])),
    ]
    want = [
        {
            "start_us": a / 1000,
            "name": values[p],
            "dur_us": d / 1000,
            "inferred": bool(f),
            "rank": [0, -7, None][k],
            "x": [1.5, 2e-05, 1e16][k],
        }
        for a, p, d, f, k in zip(
            ns.tolist(), pick.tolist(), back.tolist(), flag.tolist(), small.tolist()
        )
    ]
    return fields, want


@pytest.mark.parametrize("n", [0, 1, 2, 5000])
@pytest.mark.parametrize("indent", [0, 3])
def test_records_from_columns_are_written_as_json_dumps_writes_their_dicts(n, indent):
    """`records_text` against `json.dumps` of the same records built with Python's own floats
    (whole ns over 15 digits, negative, zero, escapes, non-ASCII, booleans, None, exponents)."""
    fields, want = _columns(n, n + indent)
    expected = json.dumps(want, indent=1).replace("\n", "\n" + " " * indent)
    assert jsonable.records_text(fields, n, indent) == expected
    held = jsonable.Records(fields, n, indent)
    assert held == want and list(held) == want and len(held) == n and held[1:] == want[1:]
    assert held.text == expected and jsonable.encoded(held).text == expected
    assert jsonable.encoded(want) is want
    assert json.loads(dumps({"a": held})) == {"a": want} and plain([held]) == [want]
    back = pickle.loads(pickle.dumps(held))
    assert type(back) is jsonable.Records and back == want and back.text == expected


@pytest.mark.parametrize("cuts", [[], [0], [1], [2500], [1, 2, 4999], [0, 0, 1700, 5000]])
def test_records_written_a_slice_at_a_time_are_the_text_of_all(cuts):
    """`records_body` of consecutive slices (empty ones too), put together by
    `records_enclosed`, against `json.dumps` of every record at once."""
    fields, want = _columns(5000, 11)
    expected = json.dumps(want, indent=1).replace("\n", "\n   ")
    assert jsonable.in_parts(fields)
    bounds = [0, *cuts, 5000]
    bodies = [
        jsonable.records_body(jsonable.sliced(fields, lo, hi), hi - lo, 3)
        for lo, hi in zip(bounds, bounds[1:])
    ]
    parts = jsonable.records_enclosed(bodies, 3)
    assert "".join(parts) == expected
    assert jsonable.records_enclosed(["", ""], 3) == ["[]"]
    # held as those pieces: written into a document without joining them first
    held = jsonable.Records(fields, 5000, 3, parts)
    assert held.text_parts == parts and held.text == expected and held == want
    assert dumps({"a": {"b": [jsonable.encoded(held)]}}) == json.dumps(
        {"a": {"b": [want]}}, indent=1
    )
    # and as pieces to be written one after another: around the records, the records
    pieces = jsonable.dumps_pieces({"a": {"b": [jsonable.encoded(held)]}}, end="\n")
    assert len(pieces) >= 3
    assert "".join(pieces) == json.dumps({"a": {"b": [want]}}, indent=1) + "\n"
    assert not jsonable.in_parts([("t", jsonable.MicrosOfNs(np.array([0, -(10**15)])))])


def test_records_beyond_fifteen_digits_are_written_as_repr_writes_them():
    """Over 15 significant digits the decimal is not the float's: the records are written by the
    general encoder, and still equal Python's text."""
    ns = np.array([10**15, 2**53 + 1, -(10**17) - 3], np.int64)
    got = jsonable.records_text([("t", jsonable.MicrosOfNs(ns))], 3, 1)
    assert got == json.dumps([{"t": v / 1000} for v in ns.tolist()], indent=1).replace("\n", "\n ")


def test_a_text_encoded_at_a_depth_is_written_as_json_dumps_writes_the_value():
    """`encode_at`: a text indented for the depth where it will sit (as a worker writes a path's
    segments) comes out as `json.dumps` writes the document, at that depth, deeper (indented by
    the difference) and shallower (written again)."""
    records = [{"start_us": 1e-05, "name": "é", "n": [1, {"k": 2e20}]}, {"start_us": 3.5}]
    texts = {d: jsonable.encode_at(records, d) for d in (0, 1, 2, 3)}
    assert json.loads(texts[3]) == records and texts[3] != texts[0]
    for depth, text in texts.items():
        doc = {
            "a": [TextOuter([jsonable.Encoded(records, text, depth)])],  # sits 4 deep
            "b": jsonable.Encoded(records, text, depth),  # sits 1 deep
            "c": jsonable.Encoded([], jsonable.encode_at([], depth), depth),
        }
        want = json.dumps(plain(doc), indent=1)
        assert want == json.dumps(
            {"a": [{"a": [records], "b": {}, "c": None}], "b": records, "c": []}, indent=1
        )
        assert dumps(doc) == want, depth
        assert dumps(doc, end="\n") == want + "\n"
