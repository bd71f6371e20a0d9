"""JUnit XML: one test case per check that ran (the enabled checks that apply to the kind of dataset); a finding
at or above --fail-on is a failure."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .. import checks
from ..report import Report
from ..severity import FailOn
from . import notes


def render(report: Report) -> str:
    fail_on = FailOn(report.summary.fail_on)
    by_code = {f.code: f for f in report.findings}
    enabled = report.checks_run()
    suite = ET.Element(
        "testsuite",
        name=f"dscan {report.source.path}",
        tests=str(len(enabled)),
        failures=str(sum(1 for f in report.findings if fail_on.fails(f.severity))),
        errors="0",
        time=f"{report.summary.duration_s:.3f}",
    )
    for check in checks.CHECKS:
        if check.code not in enabled:
            continue
        case = ET.SubElement(suite, "testcase", classname=f"dscan.{check.code}", name=check.name, time="0")
        finding = by_code.get(check.code)
        if finding is None:
            continue
        body = "\n".join(loc.short() + (f": {loc.detail}" if loc.detail else "") for loc in finding.locations)
        if finding.truncated:
            body += f"\n... {finding.count - len(finding.locations)} more"
        body += f"\n\nWhy: {check.why}\nFix: {check.fix}"
        tag = "failure" if fail_on.fails(finding.severity) else "system-out"
        if tag == "failure":
            ET.SubElement(
                case, tag, message=f"{finding.severity.value}: {finding.message}", type=check.code
            ).text = body
        else:
            ET.SubElement(case, tag).text = f"{finding.severity.value}: {finding.message}\n{body}"
    shown = notes(report)
    if shown:  # what the scan left out, where CI servers show a suite's output
        ET.SubElement(suite, "system-out").text = "\n".join(f"note: {note}" for note in shown)
    root = ET.Element("testsuites", name="dscan")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
