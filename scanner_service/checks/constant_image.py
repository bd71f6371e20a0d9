"""I008 constant-image: images whose every pixel has the same value."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I008",
    name="constant-image",
    severity=Severity.WARNING,
    summary="Finds images whose every pixel has the same value (all black, all white, one colour).",
    why=(
        "Per-image standardisation divides by the image's standard deviation, 0: NaN in every pixel, then "
        "NaN "
        "loss. Otherwise they carry no information under a real label: placeholder images from a failed "
        "download ('photo unavailable'), black frames, blank scans."
    ),
    fix="Remove them (and their list entries), or re-download the originals.",
    message="{count} constant image{s}",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.constant is not None and verdict.usable:
        ctx.emit(CHECK.code, detail(item, f"every pixel is {verdict.constant} ({verdict.width}×{verdict.height})"))
