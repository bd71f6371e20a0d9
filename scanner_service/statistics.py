"""Per-block summaries of numeric data, folded into mergeable running moments per channel.

The fast path (every value finite) costs one ``isfinite`` test and a few reductions over a block that is
still in cache; blocks with NaN or Inf take a slower masked path, which is where the exact locations come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .items import DatasetMeta, NumericBlock
from .partial import DatasetStats, Partial, combine_moments

MAX_CHANNELS = 65_536
"""Datasets with more features than this get one set of moments for all values."""

FLOAT16_EXPONENT = np.uint16(0x7C00)


def channel_layout(shape: tuple[int, ...]) -> tuple[int | None, int]:
    """The axis that holds channels (features) and how many there are: axis 1 when there is one."""
    if len(shape) >= 2 and 0 < shape[1] <= MAX_CHANNELS:
        return 1, shape[1]
    return None, 1


@dataclass(slots=True)
class BlockSummary:
    """What the checks of one block share, computed once."""

    all_finite: bool
    finite_min: float
    finite_max: float
    values: np.ndarray[Any, Any]
    """The block as a float array (the data itself for float blocks)."""


def _as_float(data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if data.dtype.kind == "f" and data.dtype.itemsize >= 4:
        return data
    return data.astype(np.float32 if data.dtype.itemsize <= 2 else np.float64)


def _all_finite(data: np.ndarray[Any, Any]) -> bool:
    if data.dtype.kind != "f":
        return True
    if data.dtype == np.float16:
        bits = np.ascontiguousarray(data).view(np.uint16)
        return not bool(((bits & FLOAT16_EXPONENT) == FLOAT16_EXPONENT).any())
    return bool(np.isfinite(data).all())


def _channel_view(values: np.ndarray[Any, Any], meta: DatasetMeta) -> np.ndarray[Any, Any]:
    """(samples, channels, rest) view of a block; one channel when the dataset has none."""
    if meta.channel_axis is None:
        return values.reshape(1, 1, -1)
    return values.reshape(values.shape[0], values.shape[1], -1)


def summarize(block: NumericBlock, partial: Partial) -> BlockSummary:
    """Update the dataset's running moments with ``block`` and return what the checks need of it."""
    meta = block.meta
    stats = partial.stats.get(meta.stats_key)
    if stats is None:
        stats = partial.stats[meta.stats_key] = DatasetStats.empty(
            meta.path, meta.dataset, meta.dtype, list(meta.shape), meta.channel_axis, meta.channels
        )
    finite = _all_finite(block.data)
    values = _as_float(block.data)
    view = _channel_view(values, meta)
    first_channel = block.offset[1] if meta.channel_axis is not None and len(block.offset) > 1 else 0
    if view.size == 0:
        return BlockSummary(True, 0.0, 0.0, values)
    if finite:
        per = view.shape[0] * view.shape[2]
        lo = view.min(axis=(0, 2))
        hi = view.max(axis=(0, 2))
        sums = view.sum(axis=(0, 2), dtype=np.float64)
        sq = np.einsum("ncj,ncj->c", view, view, dtype=np.float64)
        counts = np.full(view.shape[1], per)
    else:
        mask = np.isfinite(view)
        stats.nan += int(np.isnan(view).sum())
        stats.inf += int(np.isinf(view).sum())
        clean = np.where(mask, view, 0.0)
        counts = mask.sum(axis=(0, 2))
        lo = np.where(mask, view, np.inf).min(axis=(0, 2))
        hi = np.where(mask, view, -np.inf).max(axis=(0, 2))
        sums = clean.sum(axis=(0, 2), dtype=np.float64)
        sq = np.einsum("ncj,ncj->c", clean, clean, dtype=np.float64)
    for c in range(view.shape[1]):
        n = int(counts[c])
        if n == 0:
            continue
        mean = float(sums[c]) / n
        m2 = 0.0 if lo[c] == hi[c] else max(0.0, float(sq[c]) - n * mean * mean)
        combine_moments(stats, first_channel + c, n, mean, m2, float(lo[c]), float(hi[c]))
    seen = counts > 0
    if not seen.any():
        return BlockSummary(finite, 0.0, 0.0, values)
    return BlockSummary(finite, float(lo[seen].min()), float(hi[seen].max()), values)


def rows_where(mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """First-axis indices of a block where ``mask`` holds anywhere in the sample."""
    if mask.ndim <= 1:
        return np.flatnonzero(mask)
    return np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))
