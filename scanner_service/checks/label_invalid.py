"""L002 label-invalid: labels that are no valid class id."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import ScanContext
from ..items import LabelBlock
from ..labels import is_classification
from ..partial import FindingTally
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="L002",
    name="label-invalid",
    severity=Severity.ERROR,
    summary="Finds labels that are NaN, infinite, negative, not whole numbers, or ≥ K when K classes are expected.",
    why=(
        "Cross-entropy indexes the logits by the label: a label ≥ K or negative reads out of bounds (a "
        "CUDA device-side assert, or garbage on CPU), a NaN label makes the loss NaN, and a fractional "
        "label is silently truncated to another class. Caffe's SoftmaxWithLoss casts float labels to int."
    ),
    fix=(
        "Repair the listed labels at the source. If labels are 1-based, subtract one; if the class count "
        "is wrong, pass the right `--num-classes`. If these are regression targets, not classes, rename "
        "the dataset or pass `--labels` for the real class labels."
    ),
    message="{count} invalid label{s}",
    options=("num_classes",),
)


def _describe(value: Any, num_classes: int | None) -> str:
    v = float(value)
    if np.isnan(v):
        return "label is NaN"
    if np.isinf(v):
        return f"label is {'+' if v > 0 else '-'}Inf"
    if v < 0:
        integral = v.is_integer() and abs(v) < 2**53 and not isinstance(value, np.integer | int)
        return f"negative label {int(v) if integral else value}"  # -1 in a float column reads -1, not -1.0
    if num_classes is not None and v >= num_classes and v == int(v):
        whole = int(value) if isinstance(value, np.integer | int) else int(v)  # uint64 is exact only as an int
        return f"label {whole} ≥ num_classes {num_classes}"
    if isinstance(value, np.unsignedinteger) and int(value) > np.iinfo(np.int64).max:
        return f"label {int(value)} does not fit int64 (cast to int64, as loaders do, it is {int(value) - 2**64})"
    if v.is_integer():  # a whole float from 2**53 on, where floats skip whole numbers: no class id
        return f"label {int(v)} too large for a class id (floats hold every whole number only up to 2**53)"
    return f"non-integer label {value}"


def on_labels(block: LabelBlock, ok: np.ndarray[Any, Any], ctx: ScanContext) -> None:
    values = block.labels.reshape(-1)
    k = ctx.config.num_classes
    bad = ~ok
    if k is not None:
        bad |= ok & (values >= k)
    # Finite float values that are no class id (fractional, negative, beyond 2**53) are invalid only where the
    # float labels are classes, which the merged counts decide: they wait for finalize. NaN and Inf are
    # invalid either way (a regression target too makes the loss NaN).
    deferred = bad & np.isfinite(values) if values.dtype.kind == "f" else np.zeros(values.shape, bool)
    bad &= ~deferred
    idx = np.flatnonzero(bad)
    cap = ctx.partial.cap
    if idx.size:
        locs = [block.locate(int(i)).model_copy(update={"detail": _describe(values[i], k)}) for i in idx[:cap]]
        ctx.emit_many(CHECK.code, int(idx.size), int(idx.size), locs)
    frac = np.flatnonzero(deferred)
    if frac.size and ctx.wants(CHECK.code):  # fractional ones counted by the label prepass; here where they are
        tally = ctx.partial.labels[block.stream]
        locs = [block.locate(int(i)).model_copy(update={"detail": _describe(values[i], k)}) for i in frac[:cap]]
        sample = FindingTally(count=int(frac.size), values=int(frac.size), locations=locs)
        tally.nonint_locations = tally.nonint_locations.merged(sample, cap)


def finalize(ctx: ScanContext) -> None:
    """Finite float labels that are no class id are invalid only where the labels are classes, not
    regression targets (a target of -3.0 is no negative label)."""
    for tally in ctx.partial.labels.values():
        if tally.nonint_locations.count and is_classification(tally, ctx.config.num_classes):
            extra = tally.nonint_locations
            ctx.emit_many(CHECK.code, extra.count, extra.values, extra.sorted_locations())
