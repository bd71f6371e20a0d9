"""R005 pickled-records: record values that are pickled Python objects needing globals, which dscan does not load."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R005",
    name="pickled-records",
    severity=Severity.WARNING,
    summary=(
        "Finds records whose value is a pickled Python object (PROTO opcode 0x80, or a protocol 0/1 pickle) that "
        "needs a global (a numpy array, an instance of a class, any call): they are not unpickled and not scanned, "
        "so none of the other checks vouches for them. Pickles of plain data (tuples, lists, dicts of bytes, str, "
        "numbers, such as ImageFolderLMDB's (jpeg_bytes, label)) are loaded with every global refused and scanned."
    ),
    why=(
        "Unpickling runs arbitrary code: loading an untrusted database's pickles can execute anything, in the "
        "scanner and in every DataLoader worker of the training job. A scan that skipped them says nothing about "
        "NaN, bad shapes or corrupt images inside. A warning, not an error: pickled records are not broken, only "
        "unchecked; `--fail-on warning` makes a CI gate refuse them."
    ),
    fix=(
        "Store the samples in a format that can be checked without running code: Caffe Datum, encoded image "
        "bytes, np.save blobs (allow_pickle=False), msgpack, or raw arrays of a fixed dtype and shape; then scan "
        "again with the matching --decoder. Or pickle plain data only: image bytes and an int label "
        "(int(label), not np.int64), which dscan reads."
    ),
    message="{count} pickled record{s}: not unpickled, not scanned",
)
