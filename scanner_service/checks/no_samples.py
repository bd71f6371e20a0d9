"""S008 no-samples: a dataset that holds no sample at all, as a whole."""

from __future__ import annotations

from ..context import ScanContext
from ..location import Location
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S008",
    name="no-samples",
    severity=Severity.ERROR,
    summary=(
        "Finds datasets that hold no sample at all, as a whole: every file, array, list or database empty (each "
        "empty part is also an empty-dataset warning), and nothing else found or left out."
    ),
    why=(
        "Training on it cannot start or does nothing: a shuffling sampler raises on zero samples (PyTorch: "
        "'num_samples should be a positive integer value, but got num_samples=0'), Caffe's data layers stop, "
        "and an epoch of zero steps averages its losses and metrics over nothing (NaN)."
    ),
    fix="Check the export or the path: the dataset that was meant to be scanned is elsewhere, or was written empty.",
    message="the dataset holds no sample",
)


LEFT_OUT = ("not_scanned", "other_formats")
"""Report notes on data the scan left out (object arrays, pickled records, other formats): samples may be
there, unscanned."""


def finalize(ctx: ScanContext) -> None:
    partial = ctx.partial
    empty = partial.findings.get("S006")
    if not ctx.wants(CHECK.code) or partial.items > 0 or empty is None or not empty.count:
        return  # (no empty part: the samples are there, left unscanned, such as pickled records)
    from . import BY_CODE  # (this module is one of the catalogue's)

    if any(BY_CODE[code].severity is not Severity.INFO for code in partial.findings if code != "S006"):
        return  # the scan says why already (an error fails it; a warning names what was left out)
    if any(key.endswith(LEFT_OUT) for key in partial.info):
        return
    where = empty.locations[0].path if empty.locations else "."
    ctx.emit(CHECK.code, Location(path=where, detail="0 samples in the whole dataset"))
