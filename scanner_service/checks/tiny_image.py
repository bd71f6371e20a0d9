"""I009 tiny-image: images whose short side is below min_size."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I009",
    name="tiny-image",
    severity=Severity.WARNING,
    summary="Finds images whose short side is below `--min-size` pixels (default 32).",
    why=(
        "Random crops larger than the image raise (RandomCrop: 'Required crop size is larger than input "
        "image "
        "size'), and upscaling a few pixels to the network's input size feeds it blur with a real label. "
        "Tiny "
        "files are often icons, tracking pixels or thumbnails that a scraper kept."
    ),
    fix="Remove them, or fetch the full-size originals; lower `--min-size` if small images are expected.",
    message="{count} image{s} smaller than the minimum size",
    options=("min_size",),
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if not verdict.usable or not verdict.width:
        return
    short = min(verdict.width, verdict.height)
    if short < ctx.config.min_size:
        text = f"{verdict.width}×{verdict.height} (short side {short} < {ctx.config.min_size})"
        ctx.emit(CHECK.code, detail(item, text))
