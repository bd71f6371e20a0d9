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
        "of their group within a factor of 2 of their length, or named as the samples: X, features, images ...; "
        "others are taken for other tables), and, in an HDF5 "
        "file of one group per sample (`/sample_000001/image`, `/sample_000001/label`), sample groups without the "
        "scalar label at least 90% of the sample groups beside them hold, each at the group's path."
    ),
    why=(
        "Loaders pair sample i with label i. With fewer labels than samples they crash at the end of an "
        "epoch or wrap around; with more, or after a partial write, every sample after the first gap is "
        "trained with another sample's label, which no loss curve reveals. A sample group without its label "
        "fails `f[f'sample_{i:06d}']['label'][()]` with KeyError mid-epoch, and shortens the label stream read in "
        "group order by one."
    ),
    fix=(
        "Regenerate the file so every dataset has one row per sample, or trim to the common length if "
        "the extra rows are known padding. The detail names both lengths. Give a sample group without its "
        "label the label (or delete the group)."
    ),
    message="sample count differs from the labels in {count} dataset{s}",
)
