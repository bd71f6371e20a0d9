"""R001 record-invalid: a record value the chosen decoder cannot decode."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R001",
    name="record-invalid",
    severity=Severity.ERROR,
    summary=(
        "Finds records whose value the decoder cannot decode (not a Datum protobuf, a Datum with no data, a bad "
        ".npy header, an empty value, a msgpack record without the label (nearly) every other record carries), "
        "with each record's key."
    ),
    why=(
        "The training reader fails on the record the moment a batch reaches it: Caffe's Data layer aborts with "
        "a failed CHECK on ParseFromString, a PyTorch Dataset raises inside a DataLoader worker, hours into the "
        "run. When no decoder recognises the values at all, nothing else about them could be checked."
    ),
    fix=(
        "Rewrite the listed records from their source (a crashed or concurrent writer often leaves them). If the "
        "values are valid but in another encoding, pass the right `--decoder` (datum, image, npy, msgpack or "
        "raw:DTYPE:SHAPE)."
    ),
    message="{count} record{s} cannot be decoded",
    options=("decoder",),
)
