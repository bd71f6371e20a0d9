"""V004 constant-feature: a feature or channel with the same value in every sample."""

from __future__ import annotations

import math

from ..context import ScanContext
from ..location import Location
from ..partial import DatasetStats
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="V004",
    name="constant-feature",
    severity=Severity.WARNING,
    summary=(
        "Finds features (columns of N×F data, channels of N×C×… data, or a whole 1-D dataset) whose "
        "value never changes across samples. Data with more than 65,536 features is judged as a whole. HDF5 "
        "datasets that are one sample each (one group per sample: /sample_*/image) are judged together: a channel "
        "(the last axis of H×W×C images, each element of a vector) constant across every sample. So are the "
        "datasets of one name in the files of a folder (shards of one set, one group per split, as their labels "
        "are one stream): a feature is constant when it is across all of them."
    ),
    why=(
        "Standardisation divides by the standard deviation: for a constant feature that is 0/0 = NaN "
        "(or x/0 = Inf), in every sample at once. Scalers that guard against it silently pass the raw "
        "value instead; either way the feature carries no information."
    ),
    fix=(
        "Drop the feature, or make the normaliser use max(std, eps). A constant channel of images often "
        "means an export bug (a channel written as zeros) worth fixing at the source."
    ),
    message="{count} constant feature{s}",
)


def finalize(ctx: ScanContext) -> None:
    if not ctx.wants(CHECK.code):
        return
    for group in _streams(list(ctx.partial.stats.values())):
        stats = group[0] if len(group) == 1 else _joined(group)
        if len(stats.shape) == 0 or stats.samples < 2:  # one sample (one record of an odd shape) varies nowhere
            continue
        same = zip(stats.count, stats.min, stats.max, strict=True)
        constant = [c for c, (n, lo, hi) in enumerate(same) if n > 1 and lo == hi]
        cap = ctx.partial.cap
        if not constant:
            continue
        axis = "column" if len(stats.shape) == 2 else "channel"
        files = "" if len(group) == 1 else f" in all {len(group)} files{_split_named(group[0], stats.path)}"
        locs = [
            Location(
                path=stats.path,
                dataset=stats.dataset or None,  # a .npy file has no dataset (as its other findings say)
                detail=(
                    f"{axis} {c} is always {stats.min[c]:.6g}"
                    if stats.channel_axis is not None
                    else f"every value is {stats.min[c]:.6g}"
                )
                + files
                + _non_finite(stats, c),
            )
            for c in constant[:cap]
        ]
        ctx.emit_many(CHECK.code, len(constant), len(constant), locs)


def _streams(all_stats: list[DatasetStats]) -> list[list[DatasetStats]]:
    """The statistics judged together: the datasets of one name in the files of a folder (the shards of one
    set: ``train_000.h5`` ...), one group per split, as their labels are one label stream; a feature constant in
    each shard but not across them is no constant feature of the data. Alone: a dataset of one file, a .npy."""
    from ..sources.naming import split_stream  # (the sources import the checks' modules)

    groups: dict[tuple[object, ...], list[DatasetStats]] = {}
    for stats in all_stats:
        name = stats.dataset or _npy_name(stats.path)
        if not name or not stats.shape or stats.rows is not None:
            key: tuple[object, ...] = (id(stats),)
        else:
            key = (split_stream(stats.path, name), tuple(stats.shape[1:]), stats.channel_axis)
        groups.setdefault(key, []).append(stats)
    return list(groups.values())


def _npy_name(path: str) -> str:
    """The array name of a .npy file (its stem: ``train/0/x.npy`` holds ``x``), '' for any other file."""
    base = path.rsplit("/", 1)[-1]
    return base[:-4] if base.lower().endswith(".npy") else ""


def _joined(group: list[DatasetStats]) -> DatasetStats:
    """One set of statistics for the datasets of ``group`` (count, min and max per feature: what the check
    reads), at the split folder their files lie in, else ``.``."""
    from ..sources.naming import split_folder

    first = group[0]
    features = range(len(first.count))
    return DatasetStats(
        path=split_folder(first.path) or ".",
        dataset=first.dataset,
        dtype=first.dtype,
        shape=[sum(s.samples for s in group), *first.shape[1:]],
        channel_axis=first.channel_axis,
        count=[sum(s.count[c] for s in group) for c in features],
        mean=[0.0] * len(first.count),
        m2=[0.0] * len(first.count),
        min=[min(s.min[c] for s in group) for c in features],
        max=[max(s.max[c] for s in group) for c in features],
        nan=sum(s.nan for s in group),
        inf=sum(s.inf for s in group),
    )


def _split_named(first: DatasetStats, path: str) -> str:
    """' (split train)' for files at ``.`` that their names place in a split (``train_000.h5``)."""
    from ..labels import unplaced_split
    from ..sources.naming import split_stream

    split = unplaced_split(split_stream(first.path, first.dataset or _npy_name(first.path)), path)
    return f" (split {split})" if split is not None else ""


def _non_finite(stats: DatasetStats, channel: int) -> str:
    """What the constant leaves out: the moments count finite values only, so a column of zeros and one Inf
    is constant too (and standardising it gives NaN all the same), but not "always 0"."""
    if not stats.nan and not stats.inf:
        return ""
    values = stats.samples * math.prod(stats.shape[1:])
    if values % len(stats.count) == 0:
        others = values // len(stats.count) - stats.count[channel]
        if others <= 0:
            return ""
        return f" where finite ({others:,} NaN or Inf value{'s' if others > 1 else ''}: see nan-value, inf-value)"
    return " where finite (the data holds NaN or Inf values: see nan-value, inf-value)"
