"""dscan's core: find the data defects that turn training into NaN, before training.

Public surface::

    from scanner_service import ScanConfig, scan, plan, scan_shard, merge, build_report, Report

The core imports no web or queue framework; the CLI, the Celery workers and the API all call these.
The names are loaded on first use (PEP 562), so ``dscan`` starts without importing what a scan of one
format does not need (the image decoders for an HDF5 file, h5py for an image folder ...).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # (``typing`` costs 8 ms, before ``dscan`` forks its head start: see ``entry``)

__version__ = "0.1.0"

_PUBLIC: dict[str, str] = {
    "DscanError": "errors",
    "Partial": "partial",
    "Report": "report",
    "ScanConfig": "config",
    "SourceError": "errors",
    "UsageError": "errors",
    "build_report": "report",
    "load_config": "config",
    "merge": "partial",
    "plan": "engine",
    "scan": "runner",
    "scan_shard": "engine",
}
"""Each public name and the module (of this package) that defines it."""

if TYPE_CHECKING:
    from typing import Any

    from .config import ScanConfig, load_config
    from .engine import plan, scan_shard
    from .errors import DscanError, SourceError, UsageError
    from .partial import Partial, merge
    from .report import Report, build_report
    from .runner import scan


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


__all__ = [
    "DscanError",
    "Partial",
    "Report",
    "ScanConfig",
    "SourceError",
    "UsageError",
    "__version__",
    "build_report",
    "load_config",
    "merge",
    "plan",
    "scan",
    "scan_shard",
]
