"""V001 nan-value: NaN in floating-point data."""

from __future__ import annotations

import numpy as np

from ..context import ScanContext
from ..items import NumericBlock
from ..severity import Severity
from ..statistics import BlockSummary, rows_where
from .base import Check

CHECK = Check(
    code="V001",
    name="nan-value",
    severity=Severity.ERROR,
    summary="Finds NaN values in floating-point data and names every sample that holds one.",
    why=(
        "NaN propagates through every arithmetic operation: one NaN input makes the forward pass NaN, "
        "the loss NaN and, after the backward pass, every weight it touched NaN. The run does not crash; "
        "it silently stops learning, often hours in, when the shuffled order reaches the bad sample."
    ),
    fix=(
        "Go to the listed samples (file, dataset and first-axis index). Drop them, or repair the step that "
        "produced them: a division by zero or log of zero in preprocessing, a failed join that left "
        "missing values, an uninitialised buffer. Re-run `dscan scan` until the finding is gone."
    ),
    message="NaN in {count} sample{s} ({values} values)",
    example="`f['x'][1234, 7] = nan` is reported as `train.h5:/x[1234]` with detail `1 NaN value`.",
)


def on_numeric(block: NumericBlock, summary: BlockSummary, ctx: ScanContext) -> None:
    if summary.all_finite or not ctx.wants(CHECK.code):
        return
    mask = np.isnan(summary.values)
    rows = rows_where(mask)
    if rows.size == 0:
        return
    per_row = mask.reshape(mask.shape[0], -1).sum(axis=1) if mask.ndim > 1 else mask.astype(np.int64)
    cap = ctx.partial.cap
    locs = [
        block.locate(int(r)).model_copy(
            update={"chunk": block.chunk, "detail": f"{int(per_row[r])} NaN value{'s' if per_row[r] > 1 else ''}"}
        )
        for r in rows[:cap]
    ]
    ctx.emit_many(CHECK.code, int(rows.size), int(mask.sum()), locs)
