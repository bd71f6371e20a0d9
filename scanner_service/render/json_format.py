"""The report as one versioned JSON object (schema: scanner_service/schema/report.schema.json)."""

from __future__ import annotations

from ..report import Report
from ..text import dump_json


def render(report: Report) -> str:
    return dump_json(report, indent=2) + "\n"
