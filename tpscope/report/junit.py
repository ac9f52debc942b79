"""The report as JUnit XML: one test case per `--fail-on` threshold or bound, so CI shows each gate."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tpscope.report.build import Report
from tpscope.report.compare import MetricComparison
from tpscope.report.metric_defs import format_delta, format_value, metric_def

SUITE_NAME = "tpscope report"
CLASS_NAME = "tpscope.report"


def case_name(metric: str, threshold_text: str) -> str:
    return f"{metric_def(metric).short} within {threshold_text}"


def _detail(c: MetricComparison) -> str:
    unit = metric_def(c.metric).unit
    interval = ("" if c.ci_low is None
                else f", 95% interval [{format_delta(c.ci_low, unit)}, {format_delta(c.ci_high, unit)}]")
    ratio = f" ({c.delta_ratio * 100:+.1f}%)" if c.delta_ratio is not None and unit != "ratio" else ""
    return (f"{metric_def(c.metric).short}: baseline {format_value(c.baseline_median, unit)} (n={c.n_baseline}), "
            f"candidate {format_value(c.candidate_median, unit)} (n={c.n_candidate}), "
            f"change {format_delta(c.delta, unit)}{ratio}{interval}: {c.status.value}, {c.reason}")


def render(report: Report) -> str:
    """The JUnit XML document (a <testsuites> with one <testsuite>)."""
    suites = ET.Element("testsuites", name=SUITE_NAME)
    suite = ET.SubElement(suites, "testsuite", name=SUITE_NAME)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="candidate", value=report.candidate.run_dir)
    ET.SubElement(props, "property", name="baseline", value=report.baseline.run_dir if report.baseline else "")
    ET.SubElement(props, "property", name="fail_on", value=report.fail_on.spec)
    failures = skipped = 0
    by_metric = {c.metric: c for c in report.comparisons}
    gates = [(t.metric, case_name(t.metric, t.text), "threshold") for t in report.fail_on.thresholds]
    gates += [(b.metric, f"{metric_def(b.metric).short} {b.text}", "bound") for b in report.fail_on.bounds]
    for metric, name, kind in gates:
        case = ET.SubElement(suite, "testcase", classname=CLASS_NAME, name=name, time="0")
        c = by_metric.get(metric)
        if c is None:
            skipped += 1
            ET.SubElement(case, "skipped", message="no baseline: a report of one run has no verdict")
            continue
        out = ET.SubElement(case, "system-out")
        out.text = _detail(c)
        failed = c.past_threshold if kind == "threshold" else c.bound_violated
        unknown = c.delta is None if kind == "threshold" else c.candidate_median is None
        if failed:
            failures += 1
            f = ET.SubElement(case, "failure", message=f"{metric_def(c.metric).short} regressed: {c.reason}",
                              type="regression")
            f.text = _detail(c)
        elif unknown:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{metric_def(c.metric).short} unknown: {c.reason}")
    n = len(gates)
    if report.loss is not None and report.loss.agreement is not None:  # the loss gate, where it applies
        n += 1
        case = ET.SubElement(suite, "testcase", classname=CLASS_NAME, name="loss curve within tolerance", time="0")
        ET.SubElement(case, "system-out").text = report.loss.line
        if report.loss.failed:
            failures += 1
            ET.SubElement(case, "failure", message=report.loss.line, type="regression").text = report.loss.line
    for el in (suites, suite):
        el.set("tests", str(n))
        el.set("failures", str(failures))
        el.set("errors", "0")
    suite.set("skipped", str(skipped))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
