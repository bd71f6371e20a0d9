"""R002 record-size-mismatch: a record whose payload size disagrees with the shape it declares."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R002",
    name="record-size-mismatch",
    severity=Severity.ERROR,
    summary=(
        "Finds records whose payload does not fill their declared shape: a raw Datum whose len(data) is not "
        "channels×height×width (or float_data with another count), an .npy value shorter or longer than its "
        "header says, a raw value of another size than --decoder raw:DTYPE:SHAPE."
    ),
    why=(
        "Caffe's DataTransformer reads channels×height×width bytes from the record: too few and it aborts on a "
        "CHECK (or reads past the buffer), too many and the image is silently sheared. Reshaping the value in "
        "Python raises a ValueError in the DataLoader worker."
    ),
    fix=(
        "Rewrite the listed records from their source images or arrays. Several records with the same wrong "
        "size usually mean a writer that resized images without updating channels, height and width."
    ),
    message="{count} record{s} whose size disagrees with their declared shape",
    options=("decoder",),
)
