"""S007 missing-member: in an HDF5 file of one group per sample, a sample group without a dataset that (nearly)
every other sample group holds. A missing scalar label is label-length-mismatch's (L001)."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S007",
    name="missing-member",
    severity=Severity.ERROR,
    summary=(
        "Finds, in an HDF5 file of one group per sample (`/sample_000001/image`, `/sample_000001/mask`), sample "
        "groups that lack a dataset at least 90% of the sample groups beside them hold, each at the group's path, "
        "naming the dataset. A member fewer groups hold is optional (notes, extra views of some samples), and a "
        "missing scalar label is label-length-mismatch (L001)."
    ),
    why=(
        "Such files are read one group at a time, `f[f'sample_{i:06d}']['image'][()]`: a group without the "
        "dataset raises KeyError in a DataLoader worker, in the middle of an epoch, at the same sample every "
        "epoch. Loaders that gather each member in group order instead pair the samples after the gap with "
        "another sample's data."
    ),
    fix=(
        "Write the missing dataset from the source data (a writer that stopped between two datasets of a group "
        "leaves it), or delete the incomplete group. The detail names the dataset and how many groups hold it."
    ),
    message="{count} sample group{s} lacking a dataset the others hold",
)
