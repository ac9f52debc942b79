"""Results as plain JSON values: the one converter behind every JSON document tpscope writes
(`tpscope analyze --json`, `tpscope report --format json`) and the dashboard's rows (metrics.md §10).

The rule, applied at every depth: a dataclass is an object of its fields in declaration order; an
enum is its value; a dict is an object with `str` keys; a list, tuple or array is a list; a numpy
scalar is the Python number; a float that is not finite (NaN, ±inf) is `null`, never 0 and never
the non-standard `NaN`.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """`value` as nested dicts, lists, strings, numbers, booleans and None (the rule above)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
