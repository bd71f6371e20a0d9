"""R005 pickled-records: record values that are pickled Python objects, which dscan does not unpickle."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R005",
    name="pickled-records",
    severity=Severity.WARNING,
    summary=(
        "Finds records whose value is a pickled Python object (PROTO opcode 0x80, or a protocol 0/1 pickle): "
        "they are not unpickled and not scanned, so none of the other checks vouches for them."
    ),
    why=(
        "Unpickling runs arbitrary code: loading an untrusted database's pickles can execute anything, in the "
        "scanner and in every DataLoader worker of the training job. A scan that skipped them says nothing about "
        "NaN, bad shapes or corrupt images inside. A warning, not an error: pickled records are not broken, only "
        "unchecked; `--fail-on warning` makes a CI gate refuse them."
    ),
    fix=(
        "Store the samples in a format that can be checked without running code: Caffe Datum, encoded image "
        "bytes, np.save blobs (allow_pickle=False), or raw arrays of a fixed dtype and shape; then scan again "
        "with the matching --decoder."
    ),
    message="{count} pickled record{s}: not unpickled, not scanned",
)
