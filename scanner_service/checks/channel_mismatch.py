"""I011 channel-mismatch: grayscale images in a mostly colour dataset, or colour ones in a grayscale one."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..location import Location
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="I011",
    name="channel-mismatch",
    severity=Severity.WARNING,
    summary=(
        "Finds the minority when a dataset mixes single-channel (grayscale) and colour images: grayscale "
        "images in a mostly RGB dataset, or the reverse (when the minority is at most 20% of the images)."
    ),
    why=(
        "A loader that does not convert every image gets 1-channel tensors among 3-channel ones: batching "
        "fails ('stack expects each tensor to be equal size'), or the first conv layer raises on the wrong "
        "channel count, when the shuffled order first puts both kinds in one batch. ImageNet's train set "
        "holds "
        "about 1% grayscale JPEGs."
    ),
    fix="Convert every image to one mode in the loader (`.convert('RGB')`), or once, offline.",
    message="{count} image{s} whose channel count differs from the rest",
)

FAMILY = "channel-mismatch"
MINORITY_SHARE = 0.2


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    gray = verdict.gray
    if gray is None:
        return
    kind = "gray" if gray else "color"
    counters = ctx.partial.counters
    counters[f"images.{kind}"] = counters.get(f"images.{kind}", 0) + 1
    # the first locations of each kind and mode (the mode is in the key: no copy of the location per image)
    samples = ctx.partial.groups.setdefault(FAMILY, {}).setdefault(f"{kind}\t{verdict.mode}", [])
    cap = ctx.partial.cap
    location = item.location
    if len(samples) < cap:
        samples.append(location)
        if len(samples) == cap:
            samples.sort(key=Location.sort_key)
    elif cap and location.sort_key() < samples[-1].sort_key():
        samples[-1] = location
        samples.sort(key=Location.sort_key)


def finalize(ctx: ScanContext) -> None:
    gray = ctx.partial.counters.get("images.gray", 0)
    color = ctx.partial.counters.get("images.color", 0)
    total = gray + color
    minority = min(gray, color)
    if not minority or minority > MINORITY_SHARE * total:
        return
    kind, other = ("gray", "colour") if gray < color else ("color", "grayscale")
    samples = sorted(
        (
            (loc, key.partition("\t")[2])
            for key, locs in ctx.partial.groups.get(FAMILY, {}).items()
            if key.partition("\t")[0] == kind
            for loc in locs
        ),
        key=lambda sample: sample[0].sort_key(),
    )
    majority = max(gray, color)
    noun = "grayscale" if kind == "gray" else "colour"
    locs = [
        loc.model_copy(update={"detail": f"{noun} ({mode}) among {majority:,} {other} images"})
        for loc, mode in samples[: ctx.partial.cap]
    ]
    ctx.emit_many(CHECK.code, minority, minority, locs)
