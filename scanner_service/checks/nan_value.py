"""V001 nan-value: NaN in floating-point data."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import ScanContext
from ..items import NumericBlock
from ..severity import Severity
from ..statistics import BlockSummary, emit_places, emit_samples
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
    message="NaN in {count} sample{s} ({values} value{vs})",
    example="`f['x'][1234, 7] = nan` is reported as `train.h5:/x[1234]` with detail `1 NaN value`.",
)


def _detail(hits: np.ndarray[Any, Any], _values: np.ndarray[Any, Any]) -> str:
    n = int(hits.sum())
    return f"{n} NaN value{'s' if n > 1 else ''}"


def on_numeric(block: NumericBlock, summary: BlockSummary, ctx: ScanContext) -> None:
    if summary.all_finite or not ctx.wants(CHECK.code):
        return
    if summary.nan_at is not None:  # the places the statistics found (few)
        emit_places(ctx, CHECK.code, block, summary.nan_at, np.isnan, _detail)
    else:
        emit_samples(ctx, CHECK.code, block, np.isnan(summary.values), _detail)
