"""V002 inf-value: +Inf or -Inf in floating-point data."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import ScanContext
from ..items import NumericBlock
from ..severity import Severity
from ..statistics import BlockSummary, emit_places, emit_samples
from .base import Check

CHECK = Check(
    code="V002",
    name="inf-value",
    severity=Severity.ERROR,
    summary="Finds +Inf and -Inf values in floating-point data and names every sample that holds one.",
    why=(
        "Inf survives a forward pass only until something subtracts or multiplies it by zero "
        "(Inf - Inf, 0 * Inf): then it is NaN. Normalisation layers compute mean and variance over the "
        "batch, so one Inf makes the whole batch NaN. `np.isnan(x).any()` does not see Inf."
    ),
    fix=(
        "Go to the listed samples. Infinities usually come from an overflow (exp of a large value, a cast "
        "of a huge float64 into float32) or a division by zero in preprocessing: clip or repair the source "
        "values, or drop the samples."
    ),
    message="Inf in {count} sample{s} ({values} value{vs})",
)


def _detail(hits: np.ndarray[Any, Any], values: np.ndarray[Any, Any]) -> str:
    pos = int((hits & (values > 0)).sum())
    neg = int(hits.sum()) - pos
    return ", ".join([f"{pos} +Inf"] * bool(pos) + [f"{neg} -Inf"] * bool(neg))


def on_numeric(block: NumericBlock, summary: BlockSummary, ctx: ScanContext) -> None:
    if summary.all_finite or not ctx.wants(CHECK.code):
        return
    if summary.inf_at is not None:  # the places the statistics found (few)
        emit_places(ctx, CHECK.code, block, summary.inf_at, np.isinf, _detail)
    else:
        emit_samples(ctx, CHECK.code, block, np.isinf(summary.values), _detail)
