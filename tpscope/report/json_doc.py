"""The report as a JSON document: a plain dump of the `Report` value plus the verdict's exit code."""

from __future__ import annotations

import dataclasses
import math
from enum import Enum

from tpscope import __version__
from tpscope.report.build import Report


def as_json(report: Report) -> dict:
    """Unknown values are null, never 0; enums are their string values."""
    doc = {"tpscope_version": __version__, "exit_code": report.exit_code}
    doc.update(_plain(report))
    doc["fail_on"] = {"spec": report.fail_on.spec, "thresholds": _plain(report.fail_on.thresholds)}
    return doc


def _plain(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    return value
