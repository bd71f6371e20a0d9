"""What a check hook is handed: the options, the partial it writes to, and which checks are on."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .config import ScanConfig
from .location import Location
from .partial import Partial


@dataclass(slots=True)
class ScanContext:
    """Inside a shard (``on_<kind>`` hooks) and after the merge (``finalize`` hooks) alike."""

    config: ScanConfig
    partial: Partial
    enabled: frozenset[str]
    moments: dict[str, Any] = field(default_factory=dict)
    """Shard-local running moments per dataset (statistics.Moments), flushed into the partial at the end."""

    def wants(self, code: str) -> bool:
        return code in self.enabled

    def emit(self, code: str, location: Location, values: int = 1) -> None:
        if code in self.enabled:
            self.partial.add(code, location, values)

    def emit_many(self, code: str, places: int, values: int, locations: Iterable[Location]) -> None:
        if code in self.enabled and places:
            self.partial.add_many(code, places, values, locations)
