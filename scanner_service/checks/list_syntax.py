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
        " ImageData take the label after the last space, and HDF5Data reads the names split at whitespace (a"
        " file name with a space is two names, and neither exists)."
    ),
    fix=(
        "Fix the named line: one entry per line, the path first, then the label separated by a single space;"
        " rename files whose names hold spaces that a list of HDF5 files names."
    ),
    message="{count} malformed line{s}",
)
