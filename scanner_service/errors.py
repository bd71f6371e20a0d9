"""The errors dscan raises, as one small tree.

::

    DscanError                 root: catch this to catch everything dscan raises on purpose
    ├── UsageError             the request itself is wrong (exit status 2)
    │   ├── ConfigError        a configuration file or option value is invalid
    │   └── UnknownCheck       a code or slug names no check
    ├── SourceError            the dataset cannot be scanned at all (exit status 2)
    │   ├── SourceNotFound     the path does not exist
    │   └── UnsupportedSource  the path is no dataset format dscan reads
    └── OutputError            the report cannot be written where it was asked for (exit status 2)

A damaged file, chunk or record inside a dataset is never an exception: it is a finding in the report.
Each error carries the context it names (``path``, ``code`` ...) and its CLI exit status.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class DscanError(Exception):
    """Root of every error dscan raises on purpose."""

    exit_code = 2


class UsageError(DscanError):
    """The request is wrong: bad option, bad value, unknown name."""


class ConfigError(UsageError):
    """A configuration file or option value is invalid."""


class UnknownCheck(UsageError):
    """A check code or slug that names no check."""

    def __init__(self, name: str, known: Iterable[str] = ()) -> None:
        close = difflib.get_close_matches(name.strip().lower(), [k.lower() for k in known], n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}? " if close else ""
        super().__init__(f"unknown check {name!r}: {hint}`dscan checks` lists them")
        self.name = name


class SourceError(DscanError):
    """The dataset cannot be scanned at all."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class SourceNotFound(SourceError):
    """The path does not exist."""


class UnsupportedSource(SourceError):
    """The path exists but is no dataset format dscan reads."""


class OutputError(DscanError):
    """The report cannot be written: its folder does not exist or is not writable, the disk is full."""


class ScanCancelled(DscanError):
    """A scan was cancelled between blocks (service jobs)."""
