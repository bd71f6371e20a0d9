"""V003 float16-overflow: finite values beyond float16's range in wider float data."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import FLOAT16_INF
from ..context import ScanContext
from ..items import NumericBlock
from ..severity import Severity
from ..statistics import BlockSummary, emit_samples
from .base import Check

CHECK = Check(
    code="V003",
    name="float16-overflow",
    severity=Severity.WARNING,
    summary=(
        "Finds finite float32/float64 values that float16 turns into ±Inf: magnitude 65520 or more (65504 is "
        "the largest float16)."
    ),
    why=(
        "Mixed-precision training (AMP, `.half()`, fp16 inference) casts inputs to float16, where "
        "anything from ±65520 on becomes ±Inf, and Inf becomes NaN at the first normalisation. The data "
        "looks fine in float32 and the run dies only when fp16 is switched on."
    ),
    fix=(
        "Rescale or clip the feature before training (standardise it, take a log of heavy-tailed "
        "values), or keep the input cast in float32/bfloat16, whose range is that of float32."
    ),
    message="values float16 makes ±Inf in {count} sample{s} ({values} value{vs})",
)


def _detail(hits: np.ndarray[Any, Any], values: np.ndarray[Any, Any]) -> str:
    return f"max |value| {float(np.abs(values[hits]).max()):.6g}"


def on_numeric(block: NumericBlock, summary: BlockSummary, ctx: ScanContext) -> None:
    if block.data.dtype.kind != "f" or block.data.dtype.itemsize <= 2 or not ctx.wants(CHECK.code):
        return
    if summary.finite_min > -FLOAT16_INF and summary.finite_max < FLOAT16_INF:
        return
    with np.errstate(invalid="ignore"):
        mask = np.isfinite(summary.values) & (np.abs(summary.values) >= FLOAT16_INF)
    for value in block.meta.missing:  # a declared missing value (netCDF's fill 9.97e36) is missing-value's
        mask &= summary.values != value
    emit_samples(ctx, CHECK.code, block, mask, _detail)
