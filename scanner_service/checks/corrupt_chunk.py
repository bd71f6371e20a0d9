"""S002 corrupt-chunk: chunks or row blocks that cannot be read or decompressed."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S002",
    name="corrupt-chunk",
    severity=Severity.ERROR,
    summary=(
        "Finds chunks or row blocks whose stored bytes cannot be read or decompressed; names the chunk and "
        "the rows it covers."
    ),
    why=(
        "Reading those rows raises (h5py's 'filter returned failure during read') the moment a batch touches "
        "them, which with shuffling can be hours into the run."
    ),
    fix=(
        "Regenerate the dataset, or at least the rows named. The rest of the file reads fine: the scan went "
        "on past the damaged chunk."
    ),
    message="{count} chunk{s} or block{s} cannot be read",
)
