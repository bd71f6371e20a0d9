"""L004 label-batch-absence: classes so rare that many batches hold none of them."""

from __future__ import annotations

from ..context import ScanContext
from ..labels import (
    absent_exceeds,
    absent_probability,
    class_counts,
    is_classification,
    smallest_batch,
    stream_location,
)
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="L004",
    name="label-batch-absence",
    severity=Severity.WARNING,
    summary=(
        "Finds classes whose probability of being absent from a batch of --batch-size B exceeds "
        "--batch-absence-threshold (default 1%), computed exactly for sampling without replacement."
    ),
    why=(
        "Losses and metrics normalised by per-batch label frequency (class-balanced or frequency-weighted "
        "cross-entropy, per-class mean losses, Dice per class) divide by the class count of the batch: "
        "a batch without the class divides 0 by 0 and the loss is NaN. With P(absent) = 5% per batch, a "
        "run of 10,000 steps meets that batch about 500 times."
    ),
    fix=(
        "Use a batch size of at least the one named in the detail, a class-balanced sampler that puts "
        "every class in every batch, or guard the normaliser (divide by max(count, 1)). Collecting more "
        "samples of the class helps most."
    ),
    message="{count} class{es} likely absent from a batch",
    options=("batch_size", "batch_absence_threshold"),
)


def _percent(p: float, unlike: float | None = None) -> str:
    """``p`` as a percentage with two decimals, or as many more as it takes to tell it from 0 and from
    ``unlike`` (P(absent) just above a 1% threshold is not "1.00%", a threshold of 1e-5 not "0.00%")."""
    text = f"{p:.2%}"
    for digits in range(3, 18):
        if (p == 0 or float(text[:-1]) != 0) and (unlike is None or text != f"{unlike:.{digits - 1}%}"):
            break
        text = f"{p:.{digits}%}"
    return text


def finalize(ctx: ScanContext) -> None:
    batch = ctx.config.batch_size
    if batch is None:
        return
    threshold = ctx.config.batch_absence_threshold
    for stream, tally in sorted(ctx.partial.labels.items()):
        if not is_classification(tally, ctx.config.num_classes):
            continue
        counts, total = class_counts(tally, ctx.config.num_classes)  # multi-hot: rows that set the class
        rows = []
        for label, n in sorted(counts.items()):
            if absent_exceeds(total, n, batch, threshold):
                rows.append((label, n, absent_probability(total, n, batch)))
        locs = []
        for label, n, p in rows[: ctx.partial.cap]:
            need = smallest_batch(total, n, threshold)
            advice = f"a batch of {need} brings it under {_percent(threshold)}" if need else "no batch size helps"
            shown = _percent(p, threshold)
            detail = f"class {label}: {n} of {total} samples, P(absent from {batch}) = {shown}; {advice}"
            locs.append(stream_location(stream, tally, detail))
        ctx.emit_many(CHECK.code, len(rows), len(rows), locs)
