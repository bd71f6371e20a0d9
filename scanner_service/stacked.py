"""Many small datasets judged at once: the statistics and the checks of a ``NumericBatch``.

A dataset of a few kilobytes (one group per sample: ``/sample_000001/image``) costs more in per-item work (a
block, its running moments, every hook, a statistics object) than in reading it. A batch stacks datasets of one
type and shape; one pass of reductions over the stack gives every dataset's per-channel count, min, max, mean and
M2, computed as ``statistics.summarize`` computes them for a dataset read as one block (the fast, shifted and
constant paths alike). A dataset where a check could find something (a NaN or Inf, a value beyond float16's
range, a sample whose probes agree: a possibly constant sample) goes through the per-block path on its own, hooks
and all: findings and their locations are those of the per-block path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import checks
from .checks.constant_sample import PROBES
from .config import FLOAT16_INF
from .context import ScanContext
from .items import NumericBatch, NumericBlock
from .partial import DatasetStats
from .statistics import ILL_CONDITIONED, SEQUENTIAL_ROWS, _as_float, summarize
from .text import printable

SHIFTED_BYTES = 8 << 20
"""Bytes of float64 differences held at once on the shifted path."""

SETTLED = frozenset({"nan_value", "inf_value", "missing_value", "float16_overflow", "constant_sample"})
"""The ``on_numeric`` hooks this module knows to find nothing in a dataset it settles (finite, within float16's
range, no declared missing value, no sample whose probes agree). Any other hook sends every dataset through the
per-block path."""


def summarize_batch(batch: NumericBatch, ctx: ScanContext) -> None:
    """Fold a batch into the shard's statistics; the datasets a check may find something in go through the
    per-block path (``summarize`` and the ``on_numeric`` hooks) one by one."""
    hooks = checks.hooks("numeric", ctx.enabled)
    if any(hook.__module__.rsplit(".", 1)[-1] not in SETTLED for hook in hooks) or any(
        m.missing or m.rows_from_blocks for m in batch.metas
    ):
        rest: list[int] = list(range(len(batch.metas)))
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            settle = _settle if batch.metas[0].sample_shape is None else _settle_samples
            rest = settle(batch, ctx, "V005" in ctx.enabled)
    rest_axes = (0,) * (batch.data.ndim - 2)
    for j in rest:
        data = batch.data[j]
        block = NumericBlock(meta=batch.metas[j], data=data, offset=(0, *rest_axes), locate=batch.locates[j])
        summary = summarize(block, ctx.moments)
        for hook in hooks:
            hook(block, summary, ctx)


def _settle(batch: NumericBatch, ctx: ScanContext, constant_samples: bool) -> list[int]:
    """Statistics of every dataset nothing can be found in, straight into the partial; the others' indices."""
    raw = batch.data
    meta = batch.metas[0]
    k, shape = raw.shape[0], meta.shape
    values = _as_float(raw)
    if meta.channel_axis is None:
        view = values.reshape(k, 1, 1, -1)
    elif meta.channel_axis > 1:  # channels last, copied channels first as ``_channel_view`` does
        view = np.ascontiguousarray(values.reshape(k, shape[0], -1, shape[-1]).transpose(0, 1, 3, 2))
    else:
        view = values.reshape(k, shape[0], shape[1], -1)
    lo, hi = _over_samples(np.minimum, view), _over_samples(np.maximum, view)
    pending = ~(np.isfinite(lo).all(axis=1) & np.isfinite(hi).all(axis=1))
    if raw.dtype.kind == "f" and raw.dtype.itemsize > 2:  # float16-overflow judges these
        pending |= (lo.min(axis=1) <= -FLOAT16_INF) | (hi.max(axis=1) >= FLOAT16_INF)
    if constant_samples and sum(n > 1 for n in shape[1:]) >= 2:  # constant-sample judges samples whose probes agree
        flat = raw.reshape(k * shape[0], -1)
        if flat.shape[1] >= 2:
            probes = np.unique(np.linspace(0, flat.shape[1] - 1, PROBES).astype(np.intp))
            agree = (flat[:, probes] == flat[:, :1]).all(axis=1)
            pending |= agree.reshape(k, shape[0]).any(axis=1)
    settled = np.flatnonzero(~pending)
    if settled.size:
        _statistics(batch, ctx, view, lo, hi, settled)
    return np.flatnonzero(pending).tolist()


def _settle_samples(batch: NumericBatch, ctx: ScanContext, constant_samples: bool) -> list[int]:
    """``_settle`` for datasets that are one sample each (one group per sample, all of one role): a dataset whose
    every value is one (a blank image) is judged by constant-sample on the per-block path; the statistics of the
    others go into their role's, at once."""
    raw = batch.data
    meta = batch.metas[0]
    k, sample = raw.shape[0], raw.shape[1:]
    values = _as_float(raw)
    axis = meta.channel_axis
    if axis is None:
        view = values.reshape(k, 1, 1, -1)
    elif axis > 1:  # channels last, copied channels first
        view = np.ascontiguousarray(values.reshape(k, 1, -1, sample[-1]).transpose(0, 1, 3, 2))
    else:
        view = values.reshape(k, 1, sample[0], -1)
    lo, hi = np.minimum.reduce(view, axis=(1, 3)), np.maximum.reduce(view, axis=(1, 3))
    pending = ~(np.isfinite(lo).all(axis=1) & np.isfinite(hi).all(axis=1))
    if raw.dtype.kind == "f" and raw.dtype.itemsize > 2:
        pending |= (lo.min(axis=1) <= -FLOAT16_INF) | (hi.max(axis=1) >= FLOAT16_INF)
    if constant_samples and sum(n > 1 for n in sample) >= 2:
        pending |= lo.min(axis=1) == hi.max(axis=1)
    settled = np.flatnonzero(~pending)
    if settled.size:
        _role_statistics(batch, ctx, view, lo, hi, settled)
    return np.flatnonzero(pending).tolist()


def _samples_first(view: np.ndarray[Any, Any]) -> bool:
    """Whether to reduce (k, samples, channels, rest) along the samples first: elementwise over whole samples,
    5-10x a reduction over both axes at once where the rest is short (the colours of H×W×C images)."""
    return bool(view.shape[1] > 1 and view.shape[3] <= 64)


def _over_samples(ufunc: np.ufunc, view: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``ufunc`` reduced over the samples and the rest of each channel: (k, channels)."""
    if _samples_first(view):
        return ufunc.reduce(ufunc.reduce(view, axis=1), axis=-1)  # type: ignore[no-any-return]
    return ufunc.reduce(view, axis=(1, 3))  # type: ignore[no-any-return]


def _statistics(
    batch: NumericBatch,
    ctx: ScanContext,
    view: np.ndarray[Any, Any],
    lo: np.ndarray[Any, Any],
    hi: np.ndarray[Any, Any],
    which: np.ndarray[Any, Any],
) -> None:
    """Every dataset ``which``'s statistics (``_moments``) into the partial."""
    per, mean, m2, lo64, hi64 = _moments(view, lo, hi, which)
    stats = ctx.partial.stats
    count = [per] * view.shape[2]
    columns = zip(which.tolist(), mean.tolist(), m2.tolist(), lo64.tolist(), hi64.tolist(), strict=True)
    for i, mean_i, m2_i, lo_i, hi_i in columns:
        meta = batch.metas[i]
        entry = DatasetStats.model_construct(
            path=printable(meta.path),
            dataset=printable(meta.dataset),
            dtype=meta.dtype,
            shape=list(meta.shape),
            channel_axis=meta.channel_axis,
            count=list(count),
            mean=mean_i,
            m2=m2_i,
            min=lo_i,
            max=hi_i,
            nan=0,
            inf=0,
            rows=None,
        )
        key = meta.stats_key
        stats[key] = stats[key].merged(entry) if key in stats else entry


def _role_statistics(
    batch: NumericBatch,
    ctx: ScanContext,
    view: np.ndarray[Any, Any],
    lo: np.ndarray[Any, Any],
    hi: np.ndarray[Any, Any],
    which: np.ndarray[Any, Any],
) -> None:
    """The datasets ``which`` (one sample each, of one role) folded into their role's statistics at once: each
    dataset's moments (``_moments``), then combined (Chan's formula, equal counts)."""
    per, mean, m2, lo64, hi64 = _moments(view, lo, hi, which)
    m = len(which)
    total = mean.mean(axis=0)
    spread = per * ((mean - total) ** 2).sum(axis=0)
    low, high = lo64.min(axis=0), hi64.max(axis=0)
    meta = batch.metas[0]
    entry = DatasetStats.model_construct(
        path=printable(meta.path),
        dataset=printable(meta.dataset),
        dtype=meta.dtype,
        shape=[1, *(meta.sample_shape or ())],
        channel_axis=meta.channel_axis,
        count=[per * m] * view.shape[2],
        mean=np.where(low == high, low, total).tolist(),
        m2=np.where(low == high, 0.0, m2.sum(axis=0) + spread).tolist(),
        min=low.tolist(),
        max=high.tolist(),
        nan=0,
        inf=0,
        rows=m,
    )
    stats = ctx.partial.stats
    key = meta.stats_key
    stats[key] = stats[key].merged(entry) if key in stats else entry


def _moments(
    view: np.ndarray[Any, Any], lo: np.ndarray[Any, Any], hi: np.ndarray[Any, Any], which: np.ndarray[Any, Any]
) -> tuple[int, np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``Moments`` of one block then ``to_stats``, for the datasets ``which`` of ``view`` (k, samples, channels,
    rest) at once: values per channel, and per dataset and channel the mean, M2, min and max. Plain sums where
    well conditioned, sums shifted by the first sample where not, and a constant channel as its value. (The sums
    run over every dataset of the stack, a copy of the others would cost more.)"""
    k, n, _, r = view.shape
    per = n * r
    if r == 1:  # N x F tables: a column summed row after row, in float32 only over a few rows
        flat = view.reshape(k, n, -1)
        wide = flat.dtype if n <= SEQUENTIAL_ROWS else np.dtype(np.float64)
        sums = flat.sum(axis=1, dtype=wide).astype(np.float64)
        squares = np.einsum("knc,knc->kc", flat, flat, dtype=wide).astype(np.float64)
    else:
        sums = _over_samples(np.add, view).astype(np.float64)
        if _samples_first(view):
            squares = np.einsum("kncj,kncj->kcj", view, view).sum(axis=-1, dtype=view.dtype).astype(np.float64)
        else:
            squares = np.einsum("kncj,kncj->kc", view, view).astype(np.float64)
    sums, squares = sums[which], squares[which]
    lo64, hi64 = lo[which].astype(np.float64), hi[which].astype(np.float64)
    mean = sums / per
    overflow = ~(np.isfinite(sums) & np.isfinite(squares))
    constant = (lo64 == hi64) & ~overflow
    ill = overflow | ((squares / per - mean * mean < ILL_CONDITIONED * squares / per) & ~constant)
    m2 = np.maximum(0.0, squares - sums * mean)
    mean = np.where(constant, lo64, mean)
    shifted = np.flatnonzero(ill.any(axis=1))
    step = max(1, SHIFTED_BYTES // max(1, view[0].size * 8))
    for a in range(0, shifted.size, step):  # sums of (x - first sample) in float64, as ``Moments.shifted``
        some = shifted[a : a + step]
        part = view[which[some]]
        ref = part[:, 0, :, 0].astype(np.float64)
        d = np.subtract(part, ref[:, None, :, None], dtype=np.float64)
        t1 = d.sum(axis=(1, 3))
        t2 = np.einsum("kncj,kncj->kc", d, d)
        sel = ill[some]
        mean[some] = np.where(sel, ref + t1 / per, mean[some])
        m2[some] = np.where(sel, np.maximum(0.0, t2 - t1 * t1 / per), m2[some])
    m2 = np.where(lo64 == hi64, 0.0, m2)
    return per, mean, m2, lo64, hi64
