"""L003 label-missing-class: a class in 0..K-1 that no sample has."""

from __future__ import annotations

from ..context import ScanContext
from ..labels import class_counts, expected_classes, is_classification, stream_location
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="L003",
    name="label-missing-class",
    severity=Severity.WARNING,
    summary=(
        "Finds classes in 0..K-1 (K from --num-classes, the ImageFolder class list, the columns of a one-hot "
        "or multi-hot label array, the members of an HDF5 enum label type, or else the largest class id + 1 "
        "when the ids skip classes below it yet fill at least half of that range, the ids of all the splits "
        "taken together for a split's labels) with no sample."
    ),
    why=(
        "A class without samples never receives a positive gradient: its logit only learns to be small. "
        "Class-balanced losses and per-class metrics divide by its frequency, 0, and turn NaN; "
        "stratified splitting fails outright. torchvision's ImageFolder refuses a class folder without images "
        "before training starts (FileNotFoundError: 'Found no valid file for the classes ...', unless "
        "allow_empty=True)."
    ),
    fix=(
        "Add samples of the class, or remove it from the label space and re-number the others. A missing "
        "class is often a filter or join that dropped a category, or an off-by-one in the label mapping."
    ),
    message="{count} class{es} without any sample",
    options=("num_classes",),
)


def finalize(ctx: ScanContext) -> None:
    for stream, tally in sorted(ctx.partial.labels.items()):
        if not is_classification(tally, ctx.config.num_classes):
            continue
        classes = expected_classes(ctx.partial, stream, ctx.config.num_classes)
        if classes is None:
            continue
        counts, _ = class_counts(tally, ctx.config.num_classes)
        missing = [c for c in range(len(classes)) if counts.get(c, 0) == 0]
        locs = [
            stream_location(stream, tally, f"class {c}" + (f" ({classes[c]})" if classes[c] != str(c) else ""))
            for c in missing[: ctx.partial.cap]
        ]
        ctx.emit_many(CHECK.code, len(missing), len(missing), locs)
