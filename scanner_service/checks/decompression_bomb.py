"""I007 decompression-bomb: images declaring more pixels than allowed."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I007",
    name="decompression-bomb",
    severity=Severity.ERROR,
    summary=(
        "Finds images whose header declares more pixels than `max_pixels` (default 178,956,970, where Pillow "
        "raises DecompressionBombError). Judged from the header alone: the image is never decoded."
    ),
    why=(
        "A few kilobytes can declare gigapixels: decoding it takes gigabytes of memory, and the loader "
        "process "
        "is killed by the OOM killer or Pillow raises DecompressionBombError mid-epoch. Crafted files use "
        "this to take down data pipelines."
    ),
    fix=(
        "Remove the file, or downscale it offline if it is a legitimate huge image; raise `max_pixels` for such data."
    ),
    message="{count} image{s} declaring more pixels than allowed",
    options=("max_pixels",),
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.bomb is not None:
        ctx.emit(CHECK.code, detail(item, verdict.bomb))
