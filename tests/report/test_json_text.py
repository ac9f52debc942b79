"""The fast JSON text of `tpscope analyze --json` against Python's json.dumps(indent=1)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tpscope.metrics import analyze_run, as_json
from tpscope.metrics.analysis import _plain
from tpscope.report.json_text import analysis_text, dumps
from tpscope.trace import load_run

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Inner:
    x: float
    names: tuple = ()


@dataclass(frozen=True)
class Outer:
    a: list
    b: dict = field(default_factory=dict)
    c: Inner | None = None


def test_floats_strings_and_scalars_are_written_as_json_dumps_writes_them():
    rng = random.Random(7)
    floats = [0.0, -0.0, 1e16, 1e15, 9.999e15, 1e-4, 9e-5, 1e-5, 5e-324, 1.7976931348623157e308, 123456789.125,
              float("nan"), float("inf"), -float("inf")]
    floats += [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(3000)]
    strings = ["", "plain", 'quote " back \\ slash /', "\x00\x01\x1f\x7f\x80\x9f", "é × §", "\u2028\u2029",
               "\U0001F600 astral", "tab\tnew\nline\rcr\bback\fform", "1e5", "0.00001,\n"]
    doc = {
        "floats": floats,
        "ints": [0, -1, 2**62, -(2**63), np.int64(5), np.int32(-7)],
        "numpy": [np.float64(1e-7), np.float32(0.5), np.bool_(True)],
        "strings": strings,
        "keys": {s: k for k, s in enumerate(strings)},
        "nested": [Outer([1.5e-9, Inner(2e20, ("a", "b"))], {"k": [], "m": {}}, Inner(float("nan")))],
        "empty": [[], {}, None, True, False],
    }
    assert dumps(doc) == json.dumps(_plain(doc), indent=1)


def test_a_real_analysis_is_written_as_before():
    analysis = analyze_run(load_run(ROOT / "tests" / "data" / "h200-shm-chunked4", workers=1))
    assert analysis_text(analysis) == json.dumps(as_json(analysis), indent=1)
