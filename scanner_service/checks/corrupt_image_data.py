"""I004 corrupt-image-data: images that decode, but with damage the decoder reported on the way."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict, judge_label
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I004",
    name="corrupt-image-data",
    severity=Severity.WARNING,
    summary=(
        "Finds images that decode, but whose decoder reported damaged data on the way: libjpeg's 'Corrupt "
        "JPEG "
        "data: N extraneous bytes before marker', 'premature end of data segment', 'bad Huffman code' (what "
        "`jpeginfo -c` reports), zlib data after the end of a PNG stream, Pillow's warnings."
    ),
    why=(
        "Pillow ignores these warnings and hands over an image whose damaged part is gray, smeared or "
        "shifted "
        "(a zeroed 4 KB block, overwritten bytes). The model trains on garbage pixels with the right label, "
        "and no error ever shows."
    ),
    fix="Re-download or re-copy the file and compare checksums with the source; no good copy: drop it.",
    message="{count} image{s} with damaged data",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.damage and verdict.usable:
        ctx.emit(CHECK.code, detail(item, f"{'; '.join(verdict.damage)} [{judge_label(verdict)}]"))
