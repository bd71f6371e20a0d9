"""I012 exif-rotation: images whose EXIF orientation asks for a rotation or mirroring."""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict
from ..imaging.exif import ORIENTATION_TEXT
from ..items import EncodedImage
from ..severity import Severity
from .base import Check
from .image_prepass import detail

CHECK = Check(
    code="I012",
    name="exif-rotation",
    severity=Severity.WARNING,
    summary=(
        "Finds images with an EXIF orientation other than 'normal' (2-8: rotated or mirrored), or without one "
        "an XMP tiff:Orientation, which Pillow's getexif() and exif_transpose take in its place. TIFFs are "
        "left out: Pillow's load() applies their orientation itself."
    ),
    why=(
        "Loaders that ignore EXIF (Pillow's Image.open, cv2 with IMREAD_IGNORE_ORIENTATION, most tensor "
        "decoders) return the pixels as stored, sideways or mirrored, while viewers and the labellers saw "
        "them "
        "upright: boxes and keypoints no longer match, and the model learns rotated objects."
    ),
    fix=(
        "Apply the rotation once, offline (`ImageOps.exif_transpose`), and save without the tag; or call "
        "exif_transpose in the loader for every image."
    ),
    message="{count} image{s} with an EXIF rotation",
)


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.orientation in ORIENTATION_TEXT and verdict.usable:
        source = "XMP orientation (tiff:Orientation; no EXIF one)" if verdict.orientation_xmp else "EXIF orientation"
        text = f"{source} {verdict.orientation}: upright after {ORIENTATION_TEXT[verdict.orientation]}"
        ctx.emit(CHECK.code, detail(item, text))
