"""I002 not-an-image: files whose content matches no image format."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I002",
    name="not-an-image",
    severity=Severity.ERROR,
    summary=(
        "Finds files whose bytes are no image in any format the decoders know, whatever their extension "
        "says: "
        "HTML error pages saved as .jpg, text, archives, macOS '._' metadata files."
    ),
    why=(
        "The loader raises on the file (Pillow: UnidentifiedImageError) when the shuffled order reaches it, "
        "and "
        "the run dies mid-epoch; a tolerant loader silently trains on fewer images than you think. A scraper "
        "that saved the server's error page under the image's name is the usual cause."
    ),
    fix=(
        "Open the file in a text editor or `file` it: re-download it, or remove it and its list entry. The "
        "detail "
        "says what the content looks like."
    ),
    message="{count} file{s} whose content is no image",
    example="`cat/0007.jpg` holding `<html>...404 Not Found...` is reported as `content is HTML ...`",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.format is None and not verdict.empty:
        ctx.emit(CHECK.code, detail(item, f"content is {verdict.content}"))
