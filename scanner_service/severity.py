"""Finding severities and the ``--fail-on`` threshold."""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]


class FailOn(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NEVER = "never"

    def fails(self, severity: Severity) -> bool:
        if self is FailOn.NEVER:
            return False
        return severity.rank >= Severity(self.value).rank
