"""dscan's core: find the data defects that turn training into NaN, before training.

Public surface::

    from scanner_service import ScanConfig, scan, plan, scan_shard, merge, build_report, Report

The core imports no web or queue framework; the CLI, the Celery workers and the API all call these.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import ScanConfig, load_config
from .engine import plan, scan_shard
from .errors import DscanError, SourceError, UsageError
from .partial import Partial, merge
from .report import Report, build_report
from .runner import scan

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
