"""Label arithmetic: histograms and runs per shard, and the batch-absence probabilities of a class.

P(class c absent from a batch of B) when batches are drawn without replacement from N samples, n_c of
class c, is C(N - n_c, B) / C(N, B). It is computed in log space, as R's dhyper computes it (Loader's
saddle-point terms), to about 1e-12 relative whatever N: log-gamma differences lose 1e-7 of it at 10**8
samples and 1e-5 at 4 * 10**9, enough to misjudge a class at the threshold and misname the batch size.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .items import LabelBlock
from .partial import LabelRun, LabelTally, Partial

MAX_DISTINCT_LABELS = 1_000_000


def label_tally(partial: Partial, stream: str, dtype_kind: str, run_threshold: int) -> LabelTally:
    tally = partial.labels.get(stream)
    if tally is None:
        tally = partial.labels[stream] = LabelTally(dtype_kind=dtype_kind, run_threshold=run_threshold)
    return tally


MAX_FLOAT_LABEL = float(1 << 53)


def integral_mask(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Which labels are whole, non-negative numbers (valid class ids before the K bound)."""
    mask: np.ndarray[Any, Any]
    if values.dtype.kind in "iub":
        if values.dtype.kind == "i":
            mask = values >= 0
        elif values.dtype.itemsize == 8:  # uint64 beyond int64: an int64 class id (torch's) makes them negative
            mask = values <= np.iinfo(np.int64).max
        else:
            mask = np.ones(values.shape, bool)
        return mask
    # beyond 2**53 a float no longer holds every whole number: no class id (2**53 itself overflows float16)
    with np.errstate(invalid="ignore", over="ignore"):
        mask = np.isfinite(values) & (values >= 0) & (values < MAX_FLOAT_LABEL) & (np.floor(values) == values)
    return mask


def tally_block(
    block: LabelBlock, partial: Partial, run_threshold: int, num_classes: int | None = None
) -> np.ndarray[Any, Any]:
    """Fold a block into its stream's histogram and runs; returns the mask of valid class ids (below
    ``num_classes`` when it is given: a label the check calls invalid is no class either).

    Fractional labels are counted here, whatever checks are enabled: whether the labels are classes at all
    depends on them."""
    values = block.labels.reshape(-1)
    tally = label_tally(partial, block.stream, values.dtype.kind, run_threshold)
    tally.total += values.size
    ok = integral_mask(values)
    if num_classes is not None:
        ok &= values < num_classes
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            tally.nonint += int((np.isfinite(values) & (np.floor(values) != values)).sum())
    classes = values[ok].astype(np.int64)
    if classes.size:
        ids, counts = np.unique(classes, return_counts=True)
        for label, n in zip(ids.tolist(), counts.tolist(), strict=True):
            tally.histogram[label] = tally.histogram.get(label, 0) + n
    _add_runs(tally, block, values, ok, run_threshold)
    return ok


def _add_runs(
    tally: LabelTally, block: LabelBlock, values: np.ndarray[Any, Any], ok: np.ndarray[Any, Any], threshold: int
) -> None:
    if values.size == 0:
        return
    ids = np.where(ok, values, -1).astype(np.int64)
    starts = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
    lengths = np.diff(np.concatenate((starts, [ids.size])))
    last = starts.size - 1
    # only the first run, the last one (they may join neighbouring blocks) and long ones are kept
    wanted = lengths > threshold
    wanted[[0, last]] = True
    keep = np.flatnonzero(wanted)  # (np.union1d would import numpy.ma in every worker: 20 ms)
    for start, length in zip(starts[keep].tolist(), lengths[keep].tolist(), strict=True):
        label = int(ids[start])
        if label < 0:
            continue
        loc = block.locate(start)
        tally.runs.append(
            LabelRun(
                start=block.global_start + start,
                length=length,
                label=label,
                path=loc.path,
                dataset=loc.dataset,
                index=loc.index,
                key=loc.key,
                line=loc.line,
            )
        )


LN_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _stirlerr(n: int) -> float:
    """log(n!) - log(sqrt(2 pi n) (n / e)^n), the error of Stirling's formula, without computing log(n!)."""
    if n <= 15:
        return 0.0 if n == 0 else math.lgamma(n + 1) - (n + 0.5) * math.log(n) + n - LN_SQRT_2PI
    nn = float(n) * n
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    if n > 500:
        return (s0 - s1 / nn) / n
    if n > 80:
        return (s0 - (s1 - s2 / nn) / nn) / n
    if n > 35:
        return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n


def _bd0(x: float, mean: float) -> float:
    """x log(x / mean) + mean - x, by its series where x is near ``mean`` (where the formula cancels)."""
    if abs(x - mean) >= 0.1 * (x + mean):
        return x * math.log(x / mean) + mean - x
    v = (x - mean) / (x + mean)
    s = (x - mean) * v
    term = 2 * x * v
    for j in range(1, 1000):
        term *= v * v
        nxt = s + term / (2 * j + 1)
        if nxt == s:
            break
        s = nxt
    return s


def _log_binomial(x: int, n: int, p: float, q: float) -> float:
    """log P(x successes in n trials of probability p), q = 1 - p (Loader 2000, R's dbinom_raw)."""
    if x == 0:
        return -_bd0(n, n * q) - n * p if p < 0.1 else n * math.log(q)
    if x == n:
        return -_bd0(n, n * p) - n * q if q < 0.1 else n * math.log(p)
    lc = _stirlerr(n) - _stirlerr(x) - _stirlerr(n - x) - _bd0(x, n * p) - _bd0(n - x, n * q)
    return lc - LN_SQRT_2PI - 0.5 * math.log(x * (n - x) / n)  # in integers: x / n near 1 would cancel


def absent_probability(total: int, in_class: int, batch: int) -> float:
    """P(no sample of a class with ``in_class`` of ``total`` samples in a batch of ``batch``)."""
    if in_class <= 0 or batch <= 0:
        return 1.0
    if batch > total - in_class:
        return 0.0
    # C(N - n, B) / C(N, B) = Bin(0; n, p) Bin(B; N - n, p) / Bin(B; N, p) for any p: with p = B / N no term
    # under- or overflows
    p, q = batch / total, (total - batch) / total
    rest = total - in_class
    log_p = _log_binomial(0, in_class, p, q) + _log_binomial(batch, rest, p, q) - _log_binomial(batch, total, p, q)
    return math.exp(log_p)


EXACT_NEAR = 1e-9
"""Relative distance to the threshold under which the probability is compared exactly (in integers)."""


def absent_exceeds(total: int, in_class: int, batch: int, threshold: float) -> bool:
    """Whether P(absent) is above ``threshold``, decided exactly where floating point cannot decide it (a
    class of 1 sample in 100 samples and a batch of 99 is absent with probability exactly 1/100)."""
    if in_class <= 0 or batch <= 0 or batch > total - in_class:
        return absent_probability(total, in_class, batch) > threshold
    # first from log-gamma (7 times faster, for the binary searches of smallest_batch): it decides unless
    # its error, a few units in the last place of log(N!), could put it on the wrong side
    rest = total - in_class
    rough = math.exp(
        math.lgamma(rest + 1) - math.lgamma(rest - batch + 1) - math.lgamma(total + 1) + math.lgamma(total - batch + 1)
    )
    if abs(rough - threshold) > (16 * math.lgamma(total + 1) * 2**-52 + EXACT_NEAR) * threshold:
        return rough > threshold
    p = absent_probability(total, in_class, batch)
    if abs(p - threshold) > EXACT_NEAR * threshold:
        return p > threshold
    # C(N - n, B) / C(N, B) as a product of min(n, B) ratios of whole numbers
    if in_class <= batch:
        num = math.prod(range(total - batch - in_class + 1, total - batch + 1))
        den = math.prod(range(total - in_class + 1, total + 1))
    else:
        num = math.prod(range(total - in_class - batch + 1, total - in_class + 1))
        den = math.prod(range(total - batch + 1, total + 1))
    limit = Fraction(repr(threshold))  # the threshold as written (0.01 is 1/100)
    return num * limit.denominator > den * limit.numerator


def smallest_batch(total: int, in_class: int, threshold: float) -> int | None:
    """The smallest batch size whose absence probability is at most ``threshold`` (None: none is)."""
    if in_class <= 0:
        return None
    lo, hi = 1, total - in_class + 1
    if absent_exceeds(total, in_class, hi, threshold):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if not absent_exceeds(total, in_class, mid, threshold):
            hi = mid
        else:
            lo = mid + 1
    return lo


def is_classification(tally: LabelTally, num_classes: int | None) -> bool:
    """Labels are class ids unless they are floats, mostly fractional, and no class count was given."""
    if num_classes is not None or tally.classes or tally.dtype_kind in "iub":
        return True
    return tally.nonint * 2 <= tally.total


def expected_classes(partial: Partial, stream: str, num_classes: int | None) -> list[str] | None:
    """Class names 0..K-1 when K is known (flag, config or the source's class list), else None."""
    tally = partial.labels[stream]
    if num_classes is not None:  # the source's names where it has them (K may differ from its class count)
        return [tally.classes[i] if i < len(tally.classes) else str(i) for i in range(num_classes)]
    return list(tally.classes) if tally.classes else None


def imbalance_ratio(histogram: dict[int, int]) -> float | None:
    """Largest class count over smallest non-empty class count."""
    counts = [n for n in histogram.values() if n > 0]
    if not counts:
        return None
    return max(counts) / min(counts)
