"""S004 missing-file: list entries whose file does not exist, and missing source files of HDF5 virtual datasets."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S004",
    name="missing-file",
    severity=Severity.ERROR,
    summary=(
        "Finds entries of a list file whose file does not exist, and source files (or source datasets) of an "
        "HDF5 virtual dataset that do not exist."
    ),
    why=(
        "The loader raises FileNotFoundError when it reaches the entry (Caffe aborts with a failed CHECK), mid-epoch. "
        "A virtual dataset is worse: HDF5 reads the part a missing source file maps as the fill value, without an "
        "error, so the model trains on rows of zeros (or whatever the fill value is) with real labels."
    ),
    fix=(
        "Fix the path in the list (paths are relative to the list file's folder, or to --root), or remove the line. "
        "For a virtual dataset, put the source file back where the detail says (relative names are looked up in "
        "the virtual dataset's folder), or rebuild the virtual dataset without it."
    ),
    message="{count} missing file{s}",
)
