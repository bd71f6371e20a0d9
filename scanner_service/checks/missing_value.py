"""V006 missing-value: values a dataset declares missing (netCDF/CF ``_FillValue``, ``missing_value``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..context import ScanContext
from ..items import NumericBlock
from ..severity import Severity
from ..statistics import BlockSummary, emit_samples
from .base import Check

CHECK = Check(
    code="V006",
    name="missing-value",
    severity=Severity.WARNING,
    summary=(
        "Finds values equal to the missing value a dataset declares: its `_FillValue` or `missing_value` "
        "attribute (netCDF, CF conventions), or in a netCDF-4 file netCDF's default fill of floats "
        "(9.97e36), which fills rows that were never written."
    ),
    why=(
        "Readers that apply the CF conventions (xarray, netCDF4) turn these values into NaN, which then "
        "propagates through the forward pass and the loss; readers that do not (h5py, a raw loader) hand "
        "over the fill value itself, -9999 or 9.97e36, an outlier that wrecks normalisation statistics and "
        "overflows float16."
    ),
    fix=(
        "Drop or impute the listed samples before training (for example `ds.dropna(...)` or "
        "`ds.fillna(...)` in xarray), or mask them in the loss. Rows never written mean the writer stopped "
        "early: re-create the file."
    ),
    message="declared missing values in {count} sample{s} ({values} value{vs})",
    example="`x` with `_FillValue = -9999` and `x[12, 3] == -9999` is reported as `era5.nc:/x[12]`.",
)


def _describe(missing: tuple[float, ...]) -> Any:
    def detail(hits: np.ndarray[Any, Any], values: np.ndarray[Any, Any]) -> str:
        n = int(hits.sum())
        shown = ", ".join(f"{float(v):.7g}" for v in np.unique(values[hits])[:3])
        return f"{n} value{'s' if n > 1 else ''} = {shown} (declared missing)"

    return detail


def on_numeric(block: NumericBlock, summary: BlockSummary, ctx: ScanContext) -> None:
    missing = block.meta.missing
    if not missing or not ctx.wants(CHECK.code):
        return
    values = block.data
    if all(v < summary.finite_min or v > summary.finite_max for v in missing):
        return  # outside the block's range (known from the statistics): no pass over the data
    mask = values == np.asarray(missing[0], values.dtype)
    for value in missing[1:]:
        mask |= values == np.asarray(value, values.dtype)
    emit_samples(ctx, CHECK.code, block, mask, _describe(missing))
