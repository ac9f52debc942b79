"""metrics.md §10: one rule turns results into JSON values; NaN and infinities are null."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from enum import Enum

import numpy as np

from tpscope.jsonable import plain
from tpscope.metrics import Summary


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

    summary = dataclasses.replace(Summary(None, None, None, None), step_time_us=np.float64("nan"),
                                  exposed_comm_ratio=float("nan"), tokens_per_s=np.float64(2.5))
    doc = as_json(RunAnalysis(run_dir="r", ranks=[0], warnings=[], steps=[], summary=summary,
                              clock_offsets_us={0: np.float64(1.0)}))
    assert doc["summary"]["step_time_us"] is None and doc["summary"]["exposed_comm_ratio"] is None
    assert doc["summary"]["tokens_per_s"] == 2.5 and doc["clock_offsets_us"] == {"0": 1.0}
    assert json.dumps(doc, allow_nan=False)
