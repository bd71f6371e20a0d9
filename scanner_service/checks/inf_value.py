"""V002 inf-value: +Inf or -Inf in floating-point data."""

from __future__ import annotations

import numpy as np

from ..context import ScanContext
from ..items import NumericBlock
from ..severity import Severity
from ..statistics import BlockSummary, rows_where
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
    message="Inf in {count} sample{s} ({values} values)",
)


def on_numeric(block: NumericBlock, summary: BlockSummary, ctx: ScanContext) -> None:
    if summary.all_finite or not ctx.wants(CHECK.code):
        return
    mask = np.isinf(summary.values)
    rows = rows_where(mask)
    if rows.size == 0:
        return
    flat = mask.reshape(mask.shape[0], -1) if mask.ndim > 1 else mask.reshape(-1, 1)
    vals = summary.values.reshape(flat.shape)
    cap = ctx.partial.cap
    locs = []
    for r in rows[:cap]:
        pos = int((flat[r] & (vals[r] > 0)).sum())
        neg = int(flat[r].sum()) - pos
        parts = [f"{pos} +Inf"] if pos else []
        parts += [f"{neg} -Inf"] if neg else []
        locs.append(block.locate(int(r)).model_copy(update={"chunk": block.chunk, "detail": ", ".join(parts)}))
    ctx.emit_many(CHECK.code, int(rows.size), int(mask.sum()), locs)
