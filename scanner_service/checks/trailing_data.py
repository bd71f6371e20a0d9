"""I006 trailing-data: bytes after an image's end marker."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail, own_length

CHECK = Check(
    code="I006",
    name="trailing-data",
    severity=Severity.WARNING,
    summary=(
        "Finds bytes after an image's end marker (JPEG EOI, PNG IEND, GIF trailer, WebP's RIFF size, the end "
        "of a BMP's pixels): concatenated files, appended archives, hidden payloads, padding."
    ),
    why=(
        "Decoders stop at the end marker and ignore the rest, so the file is not what its size suggests: two "
        "images glued together by a broken download or export show only the first, and appended data can be "
        "a payload smuggled into a dataset. Checksums of the 'same' image differ."
    ),
    fix="Cut the file at the end marker (re-encode it), or find the step that appends to files.",
    message="{count} file{s} with data after the end of the image",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    extra = verdict.trailing - (len(item.data) - own_length(item, verdict))  # (a slot's zero padding is none)
    if extra > 0 and verdict.usable:
        ctx.emit(
            CHECK.code,
            detail(item, f"{extra:,} bytes after the end of the image: {verdict.trailing_what}"),
        )
