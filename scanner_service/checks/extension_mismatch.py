"""I005 extension-mismatch: the content's format differs from what the file extension says."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict, claimed_format
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I005",
    name="extension-mismatch",
    severity=Severity.WARNING,
    summary="Finds images whose content format differs from their file extension (a PNG named .jpg ...).",
    why=(
        "Loaders that pick the decoder by extension fail on them (TensorFlow's decode_jpeg on a PNG, DALI's "
        "JPEG decoder), and tools that filter by extension miss or mishandle them. ImageNet's train set has "
        "a PNG and CMYK files among its .JPEG files; pipelines written for JPEG break on exactly those."
    ),
    fix="Rename the file to its real format, or re-encode it to the format the extension names.",
    message="{count} file{s} whose content does not match the extension",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if not item.name or verdict.format is None:
        return
    claimed = claimed_format(item.name)
    if claimed is not None and claimed != verdict.format:
        ext = item.name[item.name.rfind(".") :]
        ctx.emit(
            CHECK.code,
            detail(item, f"content is {verdict.format.upper()}, the extension {ext} says {claimed.upper()}"),
        )
