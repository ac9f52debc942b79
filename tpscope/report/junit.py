"""The report as JUnit XML: one test case per `--fail-on` threshold or bound, so CI shows each gate."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tpscope.numbers import number
from tpscope.report.build import Report
from tpscope.report.compare import MetricComparison
from tpscope.report.metric_defs import format_delta, format_value, metric_def
from tpscope.text import printable as _x  # XML 1.0 holds no control characters nor lone surrogates

SUITE_NAME = "tpscope report"
CLASS_NAME = "tpscope.report"


def case_name(metric: str, threshold_text: str) -> str:
    return f"{metric_def(metric).short} within {threshold_text}"


def _detail(c: MetricComparison) -> str:
    unit = metric_def(c.metric).unit
    interval = (
        ""
        if c.ci_low is None
        else f", 95% interval [{format_delta(c.ci_low, unit)}, {format_delta(c.ci_high, unit)}]"
    )
    ratio = (
        f" ({number(c.delta_ratio, 'relative')})"
        if c.delta_ratio is not None and unit != "ratio"
        else ""
    )
    return (
        f"{metric_def(c.metric).short}: baseline {format_value(c.baseline_median, unit)} (n={c.n_baseline}), "
        f"candidate {format_value(c.candidate_median, unit)} (n={c.n_candidate}), "
        f"change {format_delta(c.delta, unit)}{ratio}{interval}: {c.status.value}, {c.reason}"
    )


def render(report: Report) -> str:
    """The JUnit XML document (a <testsuites> with one <testsuite>), written by junitparser."""
    from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

    suite = TestSuite(SUITE_NAME)
    suite.add_property("candidate", _x(report.candidate.run_dir))
    suite.add_property("baseline", _x(report.baseline.run_dir) if report.baseline else "")
    suite.add_property("fail_on", _x(report.fail_on.spec))
    by_metric = {c.metric: c for c in report.comparisons}
    gates = [
        (t.metric, case_name(t.metric, t.text), "threshold") for t in report.fail_on.thresholds
    ]
    gates += [
        (b.metric, f"{metric_def(b.metric).short} {b.text}", "bound") for b in report.fail_on.bounds
    ]
    for metric, name, kind in gates:
        case = TestCase(name, classname=CLASS_NAME, time=0)
        suite.add_testcase(case)
        c = by_metric.get(metric)
        if c is None:
            case.result = [Skipped("no baseline: a report of one run has no verdict")]
            continue
        case.system_out = _x(_detail(c))
        failed = c.past_threshold if kind == "threshold" else c.bound_violated
        unknown = c.delta is None if kind == "threshold" else c.candidate_median is None
        if failed:
            failure = Failure(
                _x(f"{metric_def(c.metric).short} regressed: {c.reason}"), "regression"
            )
            failure.text = _x(_detail(c))
            case.result = [failure]
        elif unknown:
            case.result = [Skipped(_x(f"{metric_def(c.metric).short} unknown: {c.reason}"))]
    # the loss gate, where it applies
    if report.loss is not None and report.loss.agreement is not None:
        case = TestCase("loss curve within tolerance", classname=CLASS_NAME, time=0)
        suite.add_testcase(case)
        case.system_out = _x(report.loss.line)
        if report.loss.failed:
            failure = Failure(_x(report.loss.line), "regression")
            failure.text = _x(report.loss.line)
            case.result = [failure]
    suite.update_statistics()
    doc = JUnitXml(SUITE_NAME)
    doc.add_testsuite(suite)
    doc.update_statistics()
    root = ET.fromstring(doc.tostring())  # junitparser writes it on one line: indent it for people
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
