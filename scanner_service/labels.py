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

from .config import MAX_CLASSES
from .items import LabelBlock
from .location import Location
from .partial import FindingTally, LabelRun, LabelTally, OneHotTally, Partial, coalesce_runs

MAX_DISTINCT_LABELS = 1_000_000


def label_tally(
    partial: Partial, stream: str, dtype_kind: str, run_threshold: int, width: int | None = None
) -> LabelTally:
    """The tally of a label stream; ``width`` K for an N×K array of 0/1 labels (one-hot or multi-hot)."""
    tally = partial.labels.get(stream)
    if tally is None:
        tally = partial.labels[stream] = LabelTally(dtype_kind=dtype_kind, run_threshold=run_threshold)
    if width is not None and tally.onehot is None:
        tally.onehot = OneHotTally(width=width)
    return tally


def is_onehot_shape(shape: tuple[int, ...]) -> bool:
    """An N×K array (K ≥ 2) named like labels is read as rows of 0/1 labels (one-hot, multi-hot)."""
    return len(shape) == 2 and shape[1] >= 2


ONEHOT_MIN_BINARY = 0.9
"""Share of the finite rows that must be all 0/1 for an N×K array to be labels at all (else: targets, scores)."""
MULTIHOT_MIN_SEVERAL = 0.1
"""Share of the 0/1 rows that must set several classes for the array to be multi-hot rather than one-hot."""
SOFT_MIN = 0.5
"""Share of the finite rows that must be soft (in [0, 1], summing to 1, not all 0/1) for soft labels."""
SOFT_TOLERANCE = 1e-3


def onehot_mode(onehot: OneHotTally) -> str | None:
    """What an N×K label array is, from its merged row counts: "onehot", "multihot", "soft", or None (no
    labels: values other than 0/1, or no finite row)."""
    finite = onehot.one + onehot.zero + onehot.several + onehot.soft + onehot.other
    binary = onehot.one + onehot.zero + onehot.several
    if finite == 0:
        return None
    if onehot.soft > SOFT_MIN * finite:
        return "soft"
    if binary < ONEHOT_MIN_BINARY * finite:
        return None
    return "multihot" if onehot.several >= MULTIHOT_MIN_SEVERAL * binary else "onehot"


def class_counts(tally: LabelTally, num_classes: int | None) -> tuple[dict[int, int], int]:
    """Samples per class, and samples: a class id's count, or for multi-hot labels the rows that set the
    class among the rows of 0/1 values (a row counts in every class it sets)."""
    oh = tally.onehot
    if oh is not None and onehot_mode(oh) == "multihot":
        counts = {c: n for c, n in oh.positives.items() if num_classes is None or c < num_classes}
        return counts, oh.one + oh.zero + oh.several
    return tally.histogram, sum(tally.histogram.values())


def _value_text(v: Any) -> str:
    f = float(v)
    return str(int(f)) if f.is_integer() else str(v)


def _onehot_detail(row: np.ndarray[Any, Any], kind: str, num_classes: int | None) -> str:
    set_cols = np.flatnonzero(row == 1)
    if kind == "zero":
        return "one-hot row with no 1 (all zeros)"
    if kind == "several":
        shown = ", ".join(str(c) for c in set_cols[:5].tolist()) + (" ..." if set_cols.size > 5 else "")
        return f"{set_cols.size} classes set in a one-hot row (columns {shown})"
    if kind == "beyond":
        col = int(set_cols[set_cols >= (num_classes or 0)][0])
        return f"a 1 in column {col} ≥ num_classes {num_classes}"
    bad = np.flatnonzero((row != 0) & (row != 1))
    col = int(bad[0])
    value = row[col]
    more = f" and {bad.size - 1} more" if bad.size > 1 else ""
    if float(value) < 0:
        return f"negative value {_value_text(value)} in a row of 0/1 labels (column {col}{more})"
    return f"value {_value_text(value)} in a row of 0/1 labels (column {col}{more}): labels are 0 or 1"


def _sample(
    where: FindingTally,
    block: LabelBlock,
    rows: np.ndarray[Any, Any],
    mask: np.ndarray[Any, Any],
    kind: str,
    num_classes: int | None,
    cap: int,
) -> FindingTally:
    idx = np.flatnonzero(mask)
    if not idx.size:
        return where
    locs: list[Location] = [
        block.locate(int(i)).model_copy(update={"detail": _onehot_detail(rows[i], kind, num_classes)})
        for i in idx[:cap]
    ]
    return where.merged(FindingTally(count=int(idx.size), values=int(idx.size), locations=locs), cap)


def tally_onehot(
    block: LabelBlock, partial: Partial, run_threshold: int, num_classes: int | None = None
) -> np.ndarray[Any, Any]:
    """Fold a block of N×K rows into its stream: rows counted by kind (the mode is decided on the merged
    counts), the class of each one-hot row (its column of the 1) in the histogram and runs, per-class
    positives for multi-hot labels, and the rows that may be invalid with their places. Returns the mask of
    rows that are valid one-hot class ids."""
    rows = block.labels
    if rows.dtype.kind == "b":
        rows = rows.view(np.uint8)
    width = int(rows.shape[1])
    tally = label_tally(partial, block.stream, "i", run_threshold, width)
    oh = tally.onehot
    assert oh is not None
    tally.total += rows.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(rows).all(axis=1) if rows.dtype.kind == "f" else np.ones(rows.shape[0], bool)
        is_one = rows == 1
        binary = ((rows == 0) | is_one).all(axis=1)
        ones = is_one.sum(axis=1)
        soft = np.zeros(rows.shape[0], bool)
        if rows.dtype.kind == "f":
            total = rows.sum(axis=1, dtype=np.float64)
            soft = finite & ~binary & ((rows >= 0) & (rows <= 1)).all(axis=1) & (abs(total - 1) <= SOFT_TOLERANCE)
    one = binary & (ones == 1)
    zero = binary & (ones == 0)
    several = binary & (ones >= 2)
    other = finite & ~binary
    oh.one += int(one.sum())
    oh.zero += int(zero.sum())
    oh.several += int(several.sum())
    oh.soft += int(soft.sum())
    oh.other += int((other & ~soft).sum())
    oh.nonfinite += int((~finite).sum())
    positives = is_one[binary].sum(axis=0)
    for c in np.flatnonzero(positives).tolist():
        oh.positives[c] = oh.positives.get(c, 0) + int(positives[c])
    ids = np.where(one, is_one.argmax(axis=1), -1).astype(np.int64)
    ok: np.ndarray[Any, Any] = one.copy()
    cap = partial.cap
    if num_classes is not None and num_classes < width:
        beyond = binary & is_one[:, num_classes:].any(axis=1)
        ok &= ~beyond
        oh.beyond_at = _sample(oh.beyond_at, block, rows, beyond, "beyond", num_classes, cap)
    classes = ids[ok]
    if classes.size:
        found, counts = np.unique(classes, return_counts=True)
        for label, n in zip(found.tolist(), counts.tolist(), strict=True):
            tally.histogram[label] = tally.histogram.get(label, 0) + n
    _add_runs(tally, block, ids, ok, run_threshold)
    oh.zero_at = _sample(oh.zero_at, block, rows, zero, "zero", num_classes, cap)
    oh.several_at = _sample(oh.several_at, block, rows, several, "several", num_classes, cap)
    oh.other_at = _sample(oh.other_at, block, rows, other, "other", num_classes, cap)
    return ok


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
    if block.onehot:
        return tally_onehot(block, partial, run_threshold, num_classes)
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


def close_runs(partial: Partial) -> None:
    """At the end of a shard, keep of each stream's runs the long ones, its first and its last.

    A shard reads a range of its label streams that no other shard reads, so a short run inside it can join no
    other shard's run. Blocks end wherever a record has no label (an LMDB's damaged records), and the runs at
    every block's ends touched none: kept to the merge, they grew with the defects (two per damaged record).
    """
    for tally in partial.labels.values():
        runs = coalesce_runs(tally.runs, tally.run_threshold)
        if len(runs) > 2:
            runs = [runs[0], *(r for r in runs[1:-1] if r.length > tally.run_threshold), runs[-1]]
        tally.runs = runs


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
    """Labels are class ids unless they are floats, mostly fractional, and no class count was given. Rows of
    0/1 labels are classes when they are one-hot or multi-hot (not soft labels, not values other than 0/1)."""
    if tally.onehot is not None:
        return onehot_mode(tally.onehot) in ("onehot", "multihot")
    if num_classes is not None or tally.classes or tally.dtype_kind in "iub":
        return True
    return tally.nonint * 2 <= tally.total


INFERRED_MIN_FILL = 0.5
"""Share of 0..M (M the largest class id) that the ids present must fill for the labels to say K = M + 1 by
themselves: a dense range with holes (a class a filter or a join dropped, labels that start at 1), not sparse
ids (category numbers, a subset of a larger label space)."""


def inferred_classes(tally: LabelTally) -> int | None:
    """K = largest class id + 1, for class ids with no class count from anywhere else (``--num-classes``,
    class folders, one-hot columns), when ids below the largest are missing and the ids present fill at least
    ``INFERRED_MIN_FILL`` of 0..K-1; None otherwise (no hole, sparse ids, or no class ids)."""
    if tally.onehot is not None or tally.classes or not tally.histogram:
        return None
    k = max(tally.histogram) + 1
    present = len(tally.histogram)  # (ids with a sample: only those are counted)
    if k > MAX_CLASSES or present == k or present < INFERRED_MIN_FILL * k:
        return None
    return k


def split_family(stream: str) -> tuple[str, str] | None:
    """(split, the stream's name without it) of the label stream of one split: ``val/y`` and ``y_val`` are
    ('val', 'y'), ``/data/test_labels`` ('test', '/data/labels'); None for a stream no split names."""
    from .sources.naming import SPLITS, name_words  # (the sources import this module)

    head, sep, rest = stream.partition("/")
    if sep and head in SPLITS.values():
        return head, rest
    base = stream.rsplit("/", 1)[-1]
    words = name_words(base)
    splits = [w for w in words if w in SPLITS]
    if len(splits) != 1:
        return None
    return SPLITS[splits[0]], stream[: len(stream) - len(base)] + "_".join(w for w in words if w not in SPLITS)


def splits_classes(partial: Partial, stream: str) -> tuple[int, list[str]] | None:
    """K from the splits of one dataset together (train's labels 0-9 and val's 0-8: 10 classes for val too, whose
    class 9 is missing), with the splits; None when ``stream`` is of no split, its splits' class ids are sparse
    (``inferred_classes``' rule on their union), or it holds every class they hold."""
    family = split_family(stream)
    if family is None or partial.labels[stream].onehot is not None:
        return None
    splits: list[str] = []
    union: set[int] = set()
    for name, tally in partial.labels.items():
        other = split_family(name)
        if other is not None and other[1] == family[1] and tally.onehot is None and tally.histogram:
            splits.append(other[0])
            union.update(tally.histogram)
    if len(splits) < 2:
        return None
    k = max(union) + 1
    if k > MAX_CLASSES or len(union) < INFERRED_MIN_FILL * k or len(partial.labels[stream].histogram) == k:
        return None
    return k, sorted(splits)


def expected_classes(partial: Partial, stream: str, num_classes: int | None) -> list[str] | None:
    """Class names 0..K-1 when K is known (flag, config, the source's class list, one-hot columns, the labels'
    own holes: ``inferred_classes``, or the splits' labels together: ``splits_classes``), else None."""
    tally = partial.labels[stream]
    if num_classes is None and tally.onehot is not None:
        num_classes = tally.onehot.width  # K columns, K classes
    if num_classes is None and not tally.classes:
        together = splits_classes(partial, stream)
        num_classes = max(inferred_classes(tally) or 0, together[0] if together else 0) or None
    if num_classes is not None:  # the source's names where it has them (K may differ from its class count)
        return [tally.classes[i] if i < len(tally.classes) else str(i) for i in range(num_classes)]
    return list(tally.classes) if tally.classes else None


def unplaced_split(stream: str, path: str) -> str | None:
    """The split of a stream of several files named for it (``train_0.h5`` and ``train_1.h5`` beside
    ``val_0.h5`` ...), which lies at ``.`` as the other splits do: its path does not say which it is. None for
    any other stream (a stream of no split is named as its labels, ``/label``, ``y``)."""
    from .sources.naming import SPLITS  # (the sources import this module)

    split = stream.split("/", 1)[0] if "/" in stream else None
    return split if path == "." and split in SPLITS.values() else None


def stream_location(stream: str, tally: LabelTally, detail: str) -> Location:
    """Where a finding on a whole label stream goes: the file that holds it, the split folder or ``.`` (see
    the README); the detail names the split where the path does not (``unplaced_split``)."""
    split = unplaced_split(stream, tally.path)
    if split is not None:
        detail += f" (split {split})"
    return Location(path=tally.path, dataset=tally.dataset, detail=detail)


def imbalance_ratio(histogram: dict[int, int]) -> float | None:
    """Largest class count over smallest non-empty class count."""
    counts = [n for n in histogram.values() if n > 0]
    if not counts:
        return None
    return max(counts) / min(counts)
