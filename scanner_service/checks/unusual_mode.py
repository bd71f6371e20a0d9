"""I010 unusual-mode: pixel formats that training code written for 8-bit RGB mishandles."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I010",
    name="unusual-mode",
    severity=Severity.WARNING,
    summary=(
        "Finds images in pixel formats that 8-bit RGB pipelines mishandle: CMYK, 16-bit, palette with "
        "transparency, grayscale with alpha (LA), 32-bit integer (I) and float (F) pixels. Float pixels are "
        "also "
        "checked for NaN and Inf (reported as nan-value and inf-value)."
    ),
    why=(
        "ToTensor and friends assume 8-bit data: 16-bit and integer pixels are clipped or scaled by 65535 "
        "instead "
        "of 255, CMYK comes out as 4 channels or inverted colours, an alpha channel makes a 2- or 4-channel "
        "tensor "
        "that will not stack with RGB ones, and a float TIFF can hold NaN, which propagates into the loss."
    ),
    fix=(
        "Convert them once, offline, to the format the rest of the data has (e.g. "
        "`Image.open(p).convert('RGB')` "
        "and save), or make the loader convert every image explicitly."
    ),
    message="{count} image{s} in an unusual pixel format",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.unusual is not None and verdict.usable:
        ctx.emit(CHECK.code, detail(item, verdict.unusual))
