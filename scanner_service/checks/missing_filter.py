"""S003 missing-filter: datasets compressed with a filter this environment lacks."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S003",
    name="missing-filter",
    severity=Severity.ERROR,
    summary=(
        "Finds datasets compressed with a filter that is not available in this environment, and names the "
        "package that provides it."
    ),
    why=(
        'Every read of the dataset fails ("required filter is not available"); whatever trains from it '
        "crashes at the first batch."
    ),
    fix=(
        "Install the package named in the detail (most plugin filters come with `pip install hdf5plugin`) "
        "wherever the data is read, or rewrite the dataset with gzip."
    ),
    message="unavailable compression filter in {count} dataset{s}",
)
