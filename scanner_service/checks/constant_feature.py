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
        "(the last axis of H×W×C images, each element of a vector) constant across every sample."
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
    for stats in ctx.partial.stats.values():
        if len(stats.shape) == 0 or stats.samples < 2:  # one sample (one record of an odd shape) varies nowhere
            continue
        same = zip(stats.count, stats.min, stats.max, strict=True)
        constant = [c for c, (n, lo, hi) in enumerate(same) if n > 1 and lo == hi]
        cap = ctx.partial.cap
        if not constant:
            continue
        axis = "column" if len(stats.shape) == 2 else "channel"
        locs = [
            Location(
                path=stats.path,
                dataset=stats.dataset or None,  # a .npy file has no dataset (as its other findings say)
                detail=(
                    f"{axis} {c} is always {stats.min[c]:.6g}"
                    if stats.channel_axis is not None
                    else f"every value is {stats.min[c]:.6g}"
                )
                + _non_finite(stats, c),
            )
            for c in constant[:cap]
        ]
        ctx.emit_many(CHECK.code, len(constant), len(constant), locs)


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
