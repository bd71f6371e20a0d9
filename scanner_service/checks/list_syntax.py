"""S005 list-syntax: malformed lines of a list file."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S005",
    name="list-syntax",
    severity=Severity.ERROR,
    summary="Finds lines of a list file that do not have the expected form (path, or path and label).",
    why=(
        "Loaders parse such a line into a wrong path or a wrong label, or abort: Caffe's convert_imageset and"
        " HDF5Data read a line as written."
    ),
    fix="Fix the named line: one entry per line, the path first, then the label separated by a single space.",
    message="{count} malformed line{s}",
)
