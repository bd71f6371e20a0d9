"""L001 label-length-mismatch: labels and data disagree on the number of samples."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="L001",
    name="label-length-mismatch",
    severity=Severity.ERROR,
    summary=(
        "Finds label datasets whose length differs from the first axis of the data beside them (the datasets "
        "of their group within a factor of 2 of their length; others are taken for other tables)."
    ),
    why=(
        "Loaders pair sample i with label i. With fewer labels than samples they crash at the end of an "
        "epoch or wrap around; with more, or after a partial write, every sample after the first gap is "
        "trained with another sample's label, which no loss curve reveals."
    ),
    fix=(
        "Regenerate the file so every dataset has one row per sample, or trim to the common length if "
        "the extra rows are known padding. The detail names both lengths."
    ),
    message="sample count differs from the labels in {count} dataset{s}",
)
