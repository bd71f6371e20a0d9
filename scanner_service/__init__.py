"""dscan's core: find the data defects that turn training into NaN, before training.

Public surface::

    from scanner_service import ScanConfig, scan, plan, scan_shard, merge, build_report, Report

The core imports no web or queue framework; the CLI, the Celery workers and the API all call these.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import ScanConfig, load_config  # noqa: E402
from .engine import plan, scan_shard  # noqa: E402
from .errors import DscanError, SourceError, UsageError  # noqa: E402
from .partial import Partial, merge  # noqa: E402
from .report import Report, build_report  # noqa: E402
from .runner import scan  # noqa: E402

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
