"""Per-block summaries of numeric data, folded into mergeable running moments per channel.

The fast path (every value finite) costs a few reductions over a block that is still in cache (min and max
propagate NaN: no separate ``isfinite`` pass). A block with NaN or Inf costs one ``isfinite`` pass more: the
places of its non-finite values, found once, give the NaN and Inf counts, the values per channel, the NaN and Inf
checks' locations, and a float64 copy of the block with zeros in their place, which takes plain sums.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .items import DatasetMeta, NumericBlock
from .partial import DatasetStats, Partial

MAX_CHANNELS = 65_536
"""Datasets with more features than this get one set of moments for all values."""


IMAGE_CHANNELS = frozenset({1, 3, 4})
"""Channel counts of images: grayscale, RGB, RGBA."""


def channel_layout(shape: tuple[int, ...], channels_last: bool = False) -> tuple[int | None, int]:
    """The axis that holds channels (features) and how many there are: axis 1 when there is one. With
    ``channels_last``, N×H×W×C images (TensorFlow's layout: 1, 3 or 4 last, no such count second) have their
    channels on the last axis."""
    if channels_last and len(shape) == 4 and shape[3] in IMAGE_CHANNELS and shape[1] not in IMAGE_CHANNELS:
        return 3, shape[3]
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
    nan_at: np.ndarray[Any, Any] | None = None
    """Where the block holds NaN: flat indices into its data (C order), ascending. None when all is finite, or
    when NaN and Inf are not few (then a mask of the block finds them: ``np.isnan(values)``)."""
    inf_at: np.ndarray[Any, Any] | None = None
    """Where it holds +Inf or -Inf, likewise."""


def complex_parts(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The float type of a complex type's real and imaginary parts: complex data is read as pairs of these (the
    same bytes), where NaN and Inf in either part are found."""
    order = dtype.byteorder if dtype.byteorder in "<>" else "="
    return np.dtype(f"{order}f{dtype.itemsize // 2}")


def _as_float(data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if data.dtype.kind == "f" and data.dtype.itemsize >= 4:
        return data if data.dtype.isnative else data.astype(data.dtype.newbyteorder("="))
    return data.astype(np.float32 if data.dtype.itemsize <= 2 else np.float64)


def _channel_view(values: np.ndarray[Any, Any], meta: DatasetMeta) -> np.ndarray[Any, Any]:
    """(samples, channels, rest) view of a block; one channel when the dataset has none. Channels last are
    copied channels first (reductions along a narrow last axis are 50 times slower than the copy)."""
    if meta.channel_axis is None:
        return values.reshape(1, 1, -1)
    if meta.channel_axis > 1:
        return np.ascontiguousarray(values.reshape(values.shape[0], -1, values.shape[-1]).transpose(0, 2, 1))
    return values.reshape(values.shape[0], values.shape[1], -1)


SHIFTED_VALUES = 1 << 17
"""Values per slice on the shifted (float64) path: 1 MB of differences at a time."""

SEQUENTIAL_ROWS = 4096
"""Rows of an N×F table summed in its own float32 (above this, in float64: a long column summed row after
row in float32 drifts by up to rows × 6e-8)."""

ILL_CONDITIONED = 0.01
"""A channel whose block variance is below this fraction of its mean square is summed shifted (exactly)."""


class Moments:
    """Running moments of one dataset inside a shard, per channel, as float64 arrays.

    Two accumulators: plain sums of x and x² for well-conditioned blocks (the fast path: no temporary), and
    sums of (x - ref) and (x - ref)² for blocks whose mean is large against their spread, where plain float32
    sums would lose the variance to cancellation. ``to_stats`` combines both into (count, mean, M2, min, max),
    which merge across shards with Chan's formula.
    """

    __slots__ = ("hi", "inf", "lo", "meta", "n", "nan", "ref", "rows", "s1", "s2", "t1", "t2", "tn")

    def __init__(self, meta: DatasetMeta) -> None:
        self.meta = meta
        c = meta.channels
        self.n = np.zeros(c, np.int64)
        self.s1 = np.zeros(c, np.float64)
        self.s2 = np.zeros(c, np.float64)
        self.tn = np.zeros(c, np.int64)
        self.t1 = np.zeros(c, np.float64)
        self.t2 = np.zeros(c, np.float64)
        self.ref = np.full(c, np.nan)
        self.lo = np.full(c, np.inf)
        self.hi = np.full(c, -np.inf)
        self.nan = 0
        self.inf = 0
        self.rows = 0

    def reference(self, sl: slice, candidates: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The channels' shift references, set from ``candidates`` (finite values of the channels) where
        unset; a channel that has shown no finite value yet keeps none (NaN)."""
        ref = self.ref[sl]
        unset = np.isnan(ref) & np.isfinite(candidates)
        if unset.any():
            ref[unset] = candidates[unset]
        return ref

    def constant(
        self, sl: slice, value: np.ndarray[Any, Any], count: int | np.ndarray[Any, Any], use: np.ndarray[Any, Any]
    ) -> None:
        """Accumulate ``count`` copies of ``value`` for the channels ``use``, without a pass over the data: a
        channel constant within a block but not across blocks (1e6, then 1e6 + 1e-3) keeps its small variance,
        which plain sums of squares cancel away."""
        d = value - self.reference(sl, value)
        self.tn[sl] += np.where(use, count, 0)
        self.t1[sl] += np.where(use, count * d, 0.0)
        self.t2[sl] += np.where(use, count * d * d, 0.0)

    def shifted(
        self,
        sl: slice,
        view: np.ndarray[Any, Any],
        mask: np.ndarray[Any, Any] | None,
        use: Any,
        candidates: np.ndarray[Any, Any] | None = None,
    ) -> None:
        """Accumulate (x - ref) sums for the channels ``use`` of the block (``mask``: finite values only;
        ``candidates``: a finite value per channel for unset references, the first row by default)."""
        first = view[0, :, 0].astype(np.float64) if candidates is None else candidates
        ref = self.reference(sl, first)[None, :, None]
        per_row = max(1, view.shape[1] * view.shape[2])
        step = max(1, SHIFTED_VALUES // per_row)
        for r in range(0, view.shape[0], step):  # float64 differences a slice at a time: bounded temporaries
            part = view[r : r + step]
            with np.errstate(invalid="ignore"):
                d = np.subtract(part, ref, dtype=np.float64)
            if mask is not None:
                np.copyto(d, 0.0, where=~mask[r : r + step])
                n = mask[r : r + step].sum(axis=(0, 2))
            else:
                n = np.full(view.shape[1], part.shape[0] * view.shape[2], np.int64)
            self.tn[sl] += np.where(use, n, 0)
            self.t1[sl] += np.where(use, d.sum(axis=(0, 2)), 0.0)
            self.t2[sl] += np.where(use, np.einsum("ncj,ncj->c", d, d), 0.0)

    def to_stats(self) -> DatasetStats:
        m = self.meta
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            nu, nt = self.n.astype(np.float64), self.tn.astype(np.float64)
            mean_u = np.where(nu > 0, self.s1 / np.maximum(nu, 1), 0.0)
            m2_u = np.maximum(0.0, self.s2 - self.s1 * mean_u)
            ref = np.where(nt > 0, self.ref, 0.0)
            mean_t = np.where(nt > 0, ref + self.t1 / np.maximum(nt, 1), 0.0)
            m2_t = np.maximum(0.0, self.t2 - self.t1 * self.t1 / np.maximum(nt, 1))
            total = nu + nt
            frac = np.where(total > 0, nt / np.maximum(total, 1), 0.0)
            delta = mean_t - mean_u
            mean = mean_u + delta * frac
            m2 = m2_u + m2_t + delta * delta * nu * frac
        seen = total > 0
        m2 = np.where(seen & (self.lo != self.hi), m2, 0.0)
        return DatasetStats(
            path=m.path,
            dataset=m.dataset,
            dtype=m.dtype,
            shape=list(m.shape) if m.sample_shape is None else [1, *m.sample_shape],
            channel_axis=m.channel_axis,
            count=(self.n + self.tn).tolist(),
            mean=np.where(seen, mean, 0.0).tolist(),
            m2=m2.tolist(),
            min=np.where(seen, self.lo, 0.0).tolist(),
            max=np.where(seen, self.hi, 0.0).tolist(),
            nan=self.nan,
            inf=self.inf,
            rows=self.rows if m.rows_from_blocks or m.sample_shape is not None else None,
        )


def flush_moments(moments: dict[str, Moments], partial: Partial) -> None:
    """Fold a shard's moment accumulators into the partial's (JSON-friendly) statistics."""
    for key, acc in moments.items():
        stats = acc.to_stats()
        partial.stats[key] = partial.stats[key].merged(stats) if key in partial.stats else stats
    moments.clear()


def summarize(block: NumericBlock, moments: dict[str, Moments]) -> BlockSummary:
    """Update the dataset's running moments with ``block`` and return what the checks need of it.

    Values near the top of their type's range (float32 beyond 1.8e19: their squares overflow) make
    non-finite sums: those channels take the float64 path, and nothing warns on the way.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _summarize(block, moments)


def _summarize(block: NumericBlock, moments: dict[str, Moments]) -> BlockSummary:
    meta = block.meta
    acc = moments.get(meta.stats_key)
    if acc is None:
        acc = moments[meta.stats_key] = Moments(meta)
    if meta.rows_from_blocks:
        acc.rows += len(block.data)
    one = meta.sample_shape is not None  # the dataset is one sample: its values viewed as (1, *shape)
    if one and not any(block.offset):
        acc.rows += 1
    values = _as_float(block.data)
    view = _channel_view(values[None] if one else values, meta)
    if view.size == 0:
        return BlockSummary(True, 0.0, 0.0, values)
    axis = meta.channel_axis
    if axis is not None and one:
        axis -= 1
    first = block.offset[axis] if axis is not None and len(block.offset) > axis else 0
    sl = slice(first, first + view.shape[1])
    flat = view.reshape(view.shape[0], view.shape[1]) if view.shape[2] == 1 else None
    if flat is not None:  # N x F tables: reductions along rows are fastest on the 2-D view
        lo, hi = flat.min(axis=0), flat.max(axis=0)
    else:
        lo, hi = view.min(axis=(0, 2)), view.max(axis=(0, 2))
    # NaN and Inf propagate into min and max: no separate isfinite pass.
    finite = bool(np.isfinite(lo).all() and np.isfinite(hi).all())
    if finite:
        if flat is not None:
            # a column is summed row after row (no pairwise summation): float32 only over a few rows
            wide = flat.dtype if flat.shape[0] <= SEQUENTIAL_ROWS else np.dtype(np.float64)
            sums = flat.sum(axis=0, dtype=wide).astype(np.float64)
            squares = np.einsum("nc,nc->c", flat, flat, dtype=wide).astype(np.float64)
        else:
            sums = view.sum(axis=(0, 2), dtype=view.dtype).astype(np.float64)
            squares = np.einsum("ncj,ncj->c", view, view).astype(np.float64)
        count = np.full(len(lo), view.shape[0] * view.shape[2])
        _fold(acc, sl, view, None, lo, hi, sums, squares, count, np.zeros(len(lo), dtype=bool))
    else:
        lo, hi, nan_at, inf_at = _non_finite(acc, sl, values, view, flat, (meta.channel_axis or 0) > 1)
    np.minimum(acc.lo[sl], lo, out=acc.lo[sl])
    np.maximum(acc.hi[sl], hi, out=acc.hi[sl])
    seen = np.isfinite(lo)
    low, high = (float(lo[seen].min()), float(hi[seen].max())) if seen.any() else (0.0, 0.0)
    if finite:
        return BlockSummary(True, low, high, values)
    return BlockSummary(False, low, high, values, nan_at, inf_at)


SPARSE = 32
"""A block with fewer than one non-finite value in this many is handled by their indices, else by masks."""


def _non_finite(
    acc: Moments,
    sl: slice,
    values: np.ndarray[Any, Any],
    view: np.ndarray[Any, Any],
    flat: np.ndarray[Any, Any] | None,
    transposed: bool,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any] | None, np.ndarray[Any, Any] | None]:
    """The moments of a block's finite values, its per-channel min and max, and where it holds NaN and Inf
    (flat indices into ``values``; None for a block dense with them, where the checks take masks). ``view`` is
    ``values`` reshaped (samples, channels, rest), or a copy of it channels first where ``transposed``.

    One ``isfinite`` pass finds the non-finite values. Where they are few (tabular data with NaN as its missing
    value), everything else works on their indices: their channels' counts come off the block's, and they are
    patched in a copy. ``fmin`` and ``fmax`` skip NaN (every non-finite value is made a quiet NaN in the copy);
    the sums run in float64 over the copy with 0.0 in their place (float64 as the masked sums before them: the
    report's digits do not move). A channel ill-conditioned or overflowing in those sums takes the shifted path, masked.
    """
    finite = np.isfinite(view)
    rows, channels, rest = view.shape
    missing = view.size - int(np.count_nonzero(finite))
    sparse = missing * SPARSE < view.size
    work = np.array(view, dtype=np.float64, order="C")  # own memory: patched below
    line = work.reshape(-1)
    if sparse:
        bad: Any = np.flatnonzero(~finite)
        is_nan = np.isnan(line[bad])
        nan = int(np.count_nonzero(is_nan))
        count = rows * rest - np.bincount((bad // rest) % channels, minlength=channels)
    else:
        bad = ~finite
        nan = int(np.count_nonzero(np.isnan(view)))
        count = finite.sum(axis=(0, 2))
    acc.nan += nan
    acc.inf += missing - nan
    axes = 0 if flat is not None else (0, 2)
    # Every NaN and Inf made a quiet NaN in the copy, even a block of NaN only: numpy's vectorised fmin and fmax
    # skip quiet NaNs, but a signalling one (0x7f800001 as float32) made them miss the true extremes (a column
    # of 1..5 and 70000 gave 5 as its max: no float16-overflow, a false constant-feature).
    _patch(line, work, bad, np.nan)
    some = work if flat is None else work.reshape(rows, channels)
    lo = np.fmin.reduce(some, axis=axes).astype(view.dtype)
    hi = np.fmax.reduce(some, axis=axes).astype(view.dtype)
    empty = count == 0  # every value of the channel NaN or Inf in this block: fmin and fmax give NaN
    lo[empty], hi[empty] = np.inf, -np.inf
    _patch(line, work, bad, 0.0)
    if flat is not None:
        table = work.reshape(rows, channels)
        sums = table.sum(axis=0)
        squares = np.einsum("nc,nc->c", table, table)
    else:
        sums = work.sum(axis=(0, 2))
        squares = np.einsum("ncj,ncj->c", work, work)
    del work, line
    _fold(acc, sl, view, finite, lo, hi, sums, squares, count, empty)
    if not sparse:
        return lo, hi, None, None
    if transposed:  # the checks name places in the block's own order
        bad = np.flatnonzero(~np.isfinite(values))
        is_nan = np.isnan(values.reshape(-1)[bad])
    return lo, hi, bad[is_nan], bad[~is_nan]


def _fold(
    acc: Moments,
    sl: slice,
    view: np.ndarray[Any, Any],
    mask: np.ndarray[Any, Any] | None,
    lo: np.ndarray[Any, Any],
    hi: np.ndarray[Any, Any],
    sums: np.ndarray[Any, Any],
    squares: np.ndarray[Any, Any],
    count: np.ndarray[Any, Any],
    empty: np.ndarray[Any, Any],
) -> None:
    """Fold a block's per-channel sums of its ``count`` values into ``acc``: plain sums where they are well
    conditioned, a constant channel's one value ``count`` times, the shifted path (over the values ``mask``
    keeps; None: all) where the sums cancel or overflow; nothing for the channels ``empty`` (no value)."""
    per = np.maximum(count, 1)
    mean = sums / per
    overflow = ~(np.isfinite(sums) & np.isfinite(squares)) & ~empty
    constant = (lo == hi) & ~overflow & ~empty
    ill = overflow | ((squares / per - mean * mean < ILL_CONDITIONED * squares / per) & ~constant & ~empty)
    well = ~ill & ~constant & ~empty
    acc.n[sl] += np.where(well, count, 0)
    acc.s1[sl] += np.where(well, sums, 0.0)
    acc.s2[sl] += np.where(well, squares, 0.0)
    if constant.any():
        acc.constant(sl, lo.astype(np.float64), count, constant)
    if ill.any():
        if mask is None:
            acc.shifted(sl, view, None, ill)
        else:  # NaN in row 0: a finite reference
            acc.shifted(sl, view, mask, ill, candidates=lo.astype(np.float64))


def _patch(line: np.ndarray[Any, Any], work: np.ndarray[Any, Any], bad: Any, value: float) -> None:
    """``value`` where ``bad`` says: flat indices into ``line``, or a mask shaped as ``work``."""
    if bad.dtype == np.bool_:
        np.copyto(work, value, where=bad)
    else:
        line[bad] = value


def emit_samples(
    ctx: Any,
    code: str,
    block: NumericBlock,
    mask: np.ndarray[Any, Any],
    describe: Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], str],
) -> None:
    """Report every sample of ``block`` where ``mask`` holds: one place per sample, one value per hit.

    ``describe(sample_mask, sample_values)`` words the detail of one sample (only the first ``cap`` are built).
    """
    rows = rows_where(mask)
    if rows.size == 0:
        return
    flat = mask.reshape(mask.shape[0], -1) if mask.ndim > 1 else mask.reshape(-1, 1)
    values = block.data.reshape(flat.shape)
    locations = [
        block.locate(int(r)).model_copy(update={"chunk": block.chunk, "detail": describe(flat[r], values[r])})
        for r in rows[: ctx.partial.cap]
    ]
    ctx.emit_many(code, int(rows.size), int(np.count_nonzero(mask)), locations)


def emit_places(
    ctx: Any,
    code: str,
    block: NumericBlock,
    at: np.ndarray[Any, Any],
    hit: Callable[[np.ndarray[Any, Any]], np.ndarray[Any, Any]],
    describe: Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], str],
) -> None:
    """``emit_samples`` for hits known by place: ``at``, ascending flat indices into the block's data (C order),
    where ``hit`` (elementwise, as ``np.isnan``) holds. Only the samples listed are looked at again."""
    if at.size == 0:
        return
    data = block.data
    width = data.size // data.shape[0] if data.ndim > 1 and data.shape[0] else 1
    rows = at // width  # ascending
    if rows.size > 1:
        rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
    values = data.reshape(-1, width)
    locations = []
    for r in rows[: ctx.partial.cap].tolist():
        row = values[r]
        detail = describe(hit(row), row)
        locations.append(block.locate(r).model_copy(update={"chunk": block.chunk, "detail": detail}))
    ctx.emit_many(code, int(rows.size), int(at.size), locations)


def rows_where(mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """First-axis indices of a block where ``mask`` holds anywhere in the sample."""
    if mask.ndim <= 1:
        return np.flatnonzero(mask)
    return np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))
