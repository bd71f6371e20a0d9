"""The verdict on one encoded image: everything the image checks judge, found in one inspection."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "F", "LA;16"})
"""Pillow modes of single-luminance images (with or without alpha)."""


@dataclass(slots=True)
class Verdict:
    """What inspecting an encoded image found. Plain data: cheap to build for every clean file.

    Exactly one of ``empty``, ``format is None`` (not an image), ``bomb``, ``error`` describes a file that
    cannot be used; otherwise the image decoded and the remaining fields describe it.
    """

    format: str | None = None
    """Content format: jpeg, png, gif, bmp, tiff, webp ... None when the bytes are no image."""
    empty: bool = False
    content: str = ""
    """For non-images: what the bytes look like (HTML, text ...)."""
    error: str | None = None
    """Why the image cannot be decoded (the decoder's own reason)."""
    bomb: str | None = None
    """Declared size above the pixel limit: the image was not decoded."""
    damage: list[str] = field(default_factory=list)
    """Damage the decoder reported while still producing an image (libjpeg's 'Corrupt JPEG data ...')."""
    trailing: int = 0
    """Bytes after the image's end marker."""
    trailing_what: str = ""
    width: int = 0
    height: int = 0
    mode: str = ""
    """Pillow's name for the pixel format (L, RGB, RGBA, P, CMYK, I;16, F ...)."""
    frames: int = 1
    unusual: str | None = None
    """Why the pixel format is risky for training code (CMYK, 16-bit, palette with transparency ...)."""
    constant: str | None = None
    """The single value of a constant image, as text; None otherwise."""
    orientation: int | None = None
    orientation_xmp: bool = False
    """Whether ``orientation`` comes from XMP (``tiff:Orientation``; EXIF has none), which Pillow's getexif() and
    so exif_transpose apply, where other loaders do not."""
    nan: int = 0
    inf: int = 0
    nan_pages: tuple[tuple[int, int], ...] = ()
    """Of a multi-page float image: (page, NaN count) of each page holding NaN, pages numbered from 0 as
    Pillow's ``seek`` numbers them. Empty for a single image."""
    inf_pages: tuple[tuple[int, int], ...] = ()
    """The same for infinite values."""
    judge: str = ""
    """Key of the decoder that judged the image (see ``scanner_service.imaging.decoders``)."""

    def values(self) -> tuple[Any, ...]:
        """Every field's value, in order: the verdict as plain data for another process, a tenth of the
        time and a fifth of the bytes of a pickled ``dataclasses.asdict`` (``Verdict(*values)`` again)."""
        return _VALUES(self)

    @property
    def usable(self) -> bool:
        """Decoded without error (damage reported as warnings still leaves it usable)."""
        return not self.empty and self.format is not None and self.error is None and self.bomb is None

    @property
    def gray(self) -> bool | None:
        """Whether the image is single-channel (None when it did not decode)."""
        if not self.usable or not self.mode:
            return None
        return self.mode in GRAY_MODES


_VALUES = attrgetter(*(f.name for f in fields(Verdict)))

PAGES_NAMED = 3
"""Pages named in a detail of NaN or Inf pixels; the rest are counted."""


def on_pages(count: int, pages: tuple[tuple[int, int], ...], what: str) -> str:
    """A count of pixels (``what``: 'NaN', 'infinite') as a finding's detail: '2 NaN pixel values', and in a
    multi-page image the pages that hold them, 'page 1, 2 NaN pixel values; page 3, 1 NaN pixel value'."""

    def values(n: int) -> str:
        return f"{n:,} {what} pixel value{'s' if n > 1 else ''}"

    if not pages:
        return values(count)
    named = "; ".join(f"page {page}, {values(n)}" for page, n in pages[:PAGES_NAMED])
    rest = len(pages) - PAGES_NAMED
    return f"{named}; {rest} more pages ({values(count)} in all)" if rest > 0 else named
