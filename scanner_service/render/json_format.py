"""The report as one versioned JSON object (schema: scanner_service/schema/report.schema.json)."""

from __future__ import annotations

from ..report import Report


def render(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"
