"""S004 missing-file: list entries whose file does not exist."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S004",
    name="missing-file",
    severity=Severity.ERROR,
    summary="Finds entries of a list file whose file does not exist.",
    why=(
        "The loader raises FileNotFoundError when it reaches the entry (Caffe aborts with a failed CHECK), mid-epoch."
    ),
    fix=("Fix the path in the list (paths are relative to the list file's folder, or to --root), or remove the line."),
    message="{count} listed file{s} missing",
)
