"""S006 empty-dataset: datasets, files or databases without samples."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S006",
    name="empty-dataset",
    severity=Severity.WARNING,
    summary="Finds datasets, files or databases that hold no samples at all.",
    why=(
        "An empty dataset makes an epoch of zero steps; averages over it divide by zero (NaN metrics), and "
        "samplers that draw from it raise."
    ),
    fix=("Check the export that produced it; remove it from the list of training sources if it is meant to be empty."),
    message="{count} empty dataset{s}",
)
