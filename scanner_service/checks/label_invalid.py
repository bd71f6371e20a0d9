"""L002 label-invalid: labels that are no valid class id."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import ScanContext
from ..items import LabelBlock
from ..labels import is_classification, onehot_mode
from ..location import Location
from ..partial import FindingTally
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="L002",
    name="label-invalid",
    severity=Severity.ERROR,
    summary=(
        "Finds labels that are NaN, infinite, negative, not whole numbers, or ≥ K when K classes are expected "
        "(float labels that are mostly fractional are regression targets, judged by no class check: a NaN or "
        "infinite one is nan-value or inf-value); "
        "in one-hot label arrays (N×K of 0/1), rows with no 1 or several 1s and values other than 0 and 1 "
        "(in multi-hot arrays, values other than 0 and 1)."
    ),
    why=(
        "Cross-entropy indexes the logits by the label: a label ≥ K or negative reads out of bounds (a "
        "CUDA device-side assert, or garbage on CPU), a NaN label makes the loss NaN, and a fractional "
        "label is silently truncated to another class. Caffe's SoftmaxWithLoss casts float labels to int. "
        "An all-zero one-hot row makes a loss normalised by the target's sum divide 0 by 0, and cross-entropy "
        "silently learns nothing from the sample; a row of two 1s trains two classes at once."
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
    if block.onehot:  # its rows wait in the stream's tally: whether one is invalid depends on the mode
        return
    values = block.labels.reshape(-1)
    k = ctx.config.num_classes
    bad = ~ok
    if k is not None:
        bad |= ok & (values >= k)
    # Float values that are no class id (fractional, negative, beyond 2**53, NaN, Inf) are label-invalid only
    # where the float labels are classes, which the merged counts decide: they wait for finalize. (NaN and Inf
    # in regression targets are nan-value and inf-value there: they make the loss NaN too.)
    floats = values.dtype.kind == "f"
    deferred = bad if floats else np.zeros(values.shape, bool)
    idx = np.flatnonzero(bad & ~deferred)
    cap = ctx.partial.cap
    if idx.size:
        locs = [block.locate(int(i)).model_copy(update={"detail": _describe(values[i], k)}) for i in idx[:cap]]
        ctx.emit_many(CHECK.code, int(idx.size), int(idx.size), locs)
    if not floats or not deferred.any():
        return
    tally = ctx.partial.labels[block.stream]
    for field, mask in (
        ("nonint_locations", deferred & np.isfinite(values)),  # fractional ones also counted by the label prepass
        ("nan_locations", deferred & np.isnan(values)),
        ("inf_locations", deferred & np.isinf(values)),
    ):
        where = np.flatnonzero(mask)
        if where.size:
            locs = [block.locate(int(i)).model_copy(update={"detail": _describe(values[i], k)}) for i in where[:cap]]
            sample = FindingTally(count=int(where.size), values=int(where.size), locations=locs)
            setattr(tally, field, getattr(tally, field).merged(sample, cap))


def finalize(ctx: ScanContext) -> None:
    """Finite float labels that are no class id are invalid only where the labels are classes, not
    regression targets (a target of -3.0 is no negative label). Rows of an N×K label array that are no one-hot
    row: all-zero rows and rows of several 1s where the array is one-hot (in multi-hot labels, no class and several
    classes are labels), values other than 0/1 in either, and 1s beyond --num-classes. NaN and Inf rows are the
    numeric checks' (missing-value, inf-value): not reported twice."""
    for tally in ctx.partial.labels.values():
        oh = tally.onehot
        if oh is not None:
            mode = onehot_mode(oh)
            if mode in ("onehot", "multihot"):
                found = [oh.other_at, oh.beyond_at] + ([oh.zero_at, oh.several_at] if mode == "onehot" else [])
                for where in found:
                    if where.count:
                        ctx.emit_many(CHECK.code, where.count, where.values, where.sorted_locations())
            continue
        classes = is_classification(tally, ctx.config.num_classes)
        found = [tally.nonint_locations, tally.nan_locations, tally.inf_locations] if classes else []
        for where in found:
            if where.count:
                ctx.emit_many(CHECK.code, where.count, where.values, where.sorted_locations())
        if not classes:  # regression targets: a NaN or Inf one is a value that makes the loss NaN
            for code, where in (("V001", tally.nan_locations), ("V002", tally.inf_locations)):
                if where.count:
                    said = (str(loc.detail).replace("label is", "regression target is", 1) for loc in where.locations)
                    locs = [loc.model_copy(update={"detail": d}) for loc, d in zip(where.locations, said, strict=True)]
                    ctx.emit_many(code, where.count, where.values, sorted(locs, key=Location.sort_key))
