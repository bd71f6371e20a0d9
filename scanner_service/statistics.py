"""Per-block summaries of numeric data, folded into mergeable running moments per channel.

The fast path (every value finite) costs one ``isfinite`` test and a few reductions over a block that is
still in cache; blocks with NaN or Inf take a slower masked path, which is where the exact locations come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .items import DatasetMeta, NumericBlock
from .partial import DatasetStats, Partial

MAX_CHANNELS = 65_536
"""Datasets with more features than this get one set of moments for all values."""


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


def _channel_view(values: np.ndarray[Any, Any], meta: DatasetMeta) -> np.ndarray[Any, Any]:
    """(samples, channels, rest) view of a block; one channel when the dataset has none."""
    if meta.channel_axis is None:
        return values.reshape(1, 1, -1)
    return values.reshape(values.shape[0], values.shape[1], -1)


class Moments:
    """Per-channel running moments of one dataset inside a shard, as numpy arrays (vectorised Chan merge)."""

    __slots__ = ("count", "hi", "inf", "lo", "m2", "mean", "meta", "nan")

    def __init__(self, meta: DatasetMeta) -> None:
        self.meta = meta
        c = meta.channels
        self.count = np.zeros(c, np.int64)
        self.mean = np.zeros(c, np.float64)
        self.m2 = np.zeros(c, np.float64)
        self.lo = np.full(c, np.inf)
        self.hi = np.full(c, -np.inf)
        self.nan = 0
        self.inf = 0

    def add(
        self,
        first: int,
        n: np.ndarray[Any, Any],
        sums: np.ndarray[Any, Any],
        m2: np.ndarray[Any, Any],
        lo: np.ndarray[Any, Any],
        hi: np.ndarray[Any, Any],
    ) -> None:
        """Fold a batch: per channel count, sum, centred sum of squares (M2), min and max."""
        sl = slice(first, first + n.size)
        nb = n.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_b = np.where(nb > 0, sums / np.maximum(nb, 1), 0.0)
            m2_b = np.where(lo == hi, 0.0, np.maximum(0.0, m2))
        na = self.count[sl].astype(np.float64)
        total = na + nb
        delta = mean_b - self.mean[sl]
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(total > 0, nb / np.maximum(total, 1), 0.0)
            self.m2[sl] += m2_b + np.where(total > 0, delta * delta * na * frac, 0.0)
        self.mean[sl] += delta * frac
        self.count[sl] += n
        self.lo[sl] = np.minimum(self.lo[sl], lo)
        self.hi[sl] = np.maximum(self.hi[sl], hi)

    def to_stats(self) -> DatasetStats:
        m = self.meta
        seen = self.count > 0
        return DatasetStats(
            path=m.path,
            dataset=m.dataset,
            dtype=m.dtype,
            shape=list(m.shape),
            channel_axis=m.channel_axis,
            count=self.count.tolist(),
            mean=self.mean.tolist(),
            m2=self.m2.tolist(),
            min=np.where(seen, self.lo, 0.0).tolist(),
            max=np.where(seen, self.hi, 0.0).tolist(),
            nan=self.nan,
            inf=self.inf,
        )


def flush_moments(moments: dict[str, Moments], partial: Partial) -> None:
    """Fold a shard's moment accumulators into the partial's (JSON-friendly) statistics."""
    for key, acc in moments.items():
        stats = acc.to_stats()
        partial.stats[key] = partial.stats[key].merged(stats) if key in partial.stats else stats
    moments.clear()


def summarize(block: NumericBlock, moments: dict[str, Moments]) -> BlockSummary:
    """Update the dataset's running moments with ``block`` and return what the checks need of it."""
    meta = block.meta
    acc = moments.get(meta.stats_key)
    if acc is None:
        acc = moments[meta.stats_key] = Moments(meta)
    values = _as_float(block.data)
    view = _channel_view(values, meta)
    first_channel = block.offset[1] if meta.channel_axis is not None and len(block.offset) > 1 else 0
    if view.size == 0:
        return BlockSummary(True, 0.0, 0.0, values)
    axes = (0, 2)
    lo = view.min(axis=axes)  # NaN and Inf propagate into min/max: no separate isfinite pass
    hi = view.max(axis=axes)
    finite = bool(np.isfinite(lo).all() and np.isfinite(hi).all())
    if finite:
        # Moments of the values shifted by a reference per channel (its first value in the block): the
        # float32 reductions stay exact enough even when the mean is large against the spread.
        ref = view[0, :, 0].copy()
        shifted = view - ref[None, :, None]
        per = view.shape[0] * view.shape[2]
        dsum = shifted.sum(axis=axes).astype(np.float64)
        dsq = np.einsum("ncj,ncj->c", shifted, shifted).astype(np.float64)
        counts = np.full(view.shape[1], per, np.int64)
        sums = dsum + per * ref.astype(np.float64)
        sq_centered = dsq - dsum * dsum / per
    else:
        mask = np.isfinite(view)
        acc.nan += int(np.isnan(view).sum())
        acc.inf += int(np.isinf(view).sum())
        clean = np.where(mask, view, 0.0)
        counts = mask.sum(axis=axes).astype(np.int64)
        lo = np.where(mask, view, np.inf).min(axis=axes)
        hi = np.where(mask, view, -np.inf).max(axis=axes)
        sums = clean.sum(axis=axes, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sums / np.maximum(counts, 1)
            dev = np.where(mask, view - mean[None, :, None].astype(view.dtype), 0.0)
        sq_centered = np.einsum("ncj,ncj->c", dev, dev, dtype=np.float64)
    acc.add(first_channel, counts, sums, sq_centered, lo.astype(np.float64), hi.astype(np.float64))
    seen = counts > 0
    if not seen.any():
        return BlockSummary(finite, 0.0, 0.0, values)
    return BlockSummary(finite, float(lo[seen].min()), float(hi[seen].max()), values)


def rows_where(mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """First-axis indices of a block where ``mask`` holds anywhere in the sample."""
    if mask.ndim <= 1:
        return np.flatnonzero(mask)
    return np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))
