"""I001 empty-file: image files of zero bytes."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="I001",
    name="empty-file",
    severity=Severity.ERROR,
    summary="Finds image files (or image records) of zero bytes.",
    why=(
        "Every decoder fails on them: Pillow raises UnidentifiedImageError, cv2.imread returns None and the "
        "next "
        "line fails on it, tf.io.decode_image raises. The run dies when the shuffled order reaches the file, "
        "or a "
        "tolerant loader drops it silently. Zero-byte files come from interrupted downloads and copies."
    ),
    fix="Download or copy the file again (compare sizes with the source), or remove it and its list entry.",
    message="{count} empty file{s}",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.empty:
        ctx.emit(CHECK.code, item.location.model_copy(update={"detail": "0 bytes"}))
