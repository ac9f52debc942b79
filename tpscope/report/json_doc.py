"""The report as a JSON document: a plain dump of the `Report` value plus the verdict's exit code."""

from __future__ import annotations

from tpscope import __version__
from tpscope.jsonable import plain
from tpscope.report.build import Report


def as_json(report: Report) -> dict:
    """Unknown values are null, never 0; enums are their string values (metrics.md §10)."""
    doc = {"tpscope_version": __version__, "exit_code": report.exit_code}
    doc.update(plain(report))
    doc["fail_on"] = {"spec": report.fail_on.spec, "thresholds": plain(report.fail_on.thresholds)}
    return doc
