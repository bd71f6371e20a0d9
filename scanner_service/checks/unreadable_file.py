"""S001 unreadable-file: files that cannot be opened at all."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S001",
    name="unreadable-file",
    severity=Severity.ERROR,
    summary=(
        "Finds files that cannot be opened as the format they claim: truncated, not HDF5 at all, a damaged "
        "superblock or header."
    ),
    why=(
        "A loader that meets the file mid-epoch raises and kills the run, or (in a tolerant loader) silently "
        "skips every sample in it, so the model trains on less data than you think."
    ),
    fix=(
        "Re-copy or regenerate the file; check the transfer that produced it (sizes and checksums). The "
        "detail carries the library's own error."
    ),
    message="{count} file{s} cannot be read",
)
