"""I003 corrupt-image: images the decoder fails on."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict, judge_label
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I003",
    name="corrupt-image",
    severity=Severity.ERROR,
    summary=(
        "Finds images the decoder fails on: truncated data, a missing end marker, broken Huffman tables, a "
        "bad "
        "CRC in any PNG chunk, a broken header, a damaged frame of a multi-frame file; and files whose "
        "decoder "
        "crashes the process. The detail carries the decoder's own reason."
    ),
    why=(
        "The loader raises when it reaches the image (Pillow: 'image file is truncated', 'broken data "
        "stream'), "
        "so the run dies mid-epoch, hours in; with ImageFile.LOAD_TRUNCATED_IMAGES set it trains on gray or "
        "garbage pixels instead. Pillow's verify() misses most of this: it decodes no JPEG data and its "
        "load() "
        "does not check the CRC of PNG image data."
    ),
    fix=(
        "Re-download or re-copy the file (truncation is the usual cause: compare sizes and checksums with "
        "the "
        "source), or remove it and its list entry."
    ),
    message="{count} corrupt image{s}",
    example=(
        "A JPEG cut short by a failed copy: `truncated: no end-of-image marker (libjpeg: Premature end of JPEG file)`."
    ),
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.error is not None and verdict.format is not None:
        ctx.emit(CHECK.code, detail(item, f"{verdict.error} [{judge_label(verdict)}]"))
