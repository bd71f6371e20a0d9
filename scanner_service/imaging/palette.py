"""Palette indices beyond the palette: pixels no colour is defined for.

A palette image stores an index per pixel; a palette (PLTE in a PNG, the colour table of a BMP or a GIF) may
hold fewer entries than the bit depth can index (16 colours in an 8-bit BMP, 4 in a GIF whose LZW codes are
8 bits). An index beyond the entries is damage (an overwritten byte, an encoder's bug) that no decoder Pillow
uses reports: libpng only warns, Pillow's BMP and GIF readers give such a pixel the colour of the zero bytes
after the palette, black, and the image trains as it is. ImageMagick refuses such a BMP ("invalid colormap
index").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def first_beyond(indices: np.ndarray[Any, Any], entries: int) -> str | None:
    """'palette index 9 beyond the 4-entry palette (row 2, column 4; 6 pixels out of range)' for the first
    pixel (rows from the top) of the (H, W) ``indices`` whose index is ``entries`` or more, else None."""
    return beyond_in_blocks([(0, indices)], entries)


def beyond_in_blocks(blocks: Iterable[tuple[int, np.ndarray[Any, Any]]], entries: int) -> str | None:
    """``first_beyond`` over the rows of an image given as blocks of (H, W) indices, each with its first row's
    number: a mask of one byte a pixel at a time, whatever the image's size and however many pixels are out
    of range (their positions as 8-byte indices took 1.6 GB for a crafted 13,000² 1-bit PNG)."""
    import numpy as np  # (here: numpy only for the files that need it; see png.py)

    first: tuple[int, int, int] | None = None
    count = 0
    for start, indices in blocks:
        if indices.size == 0 or int(indices.max()) < entries:
            continue
        mask = indices >= entries
        if first is None:
            row, column = divmod(int(mask.argmax()), indices.shape[1])
            first = (int(indices[row, column]), start + row, column)
        count += int(np.count_nonzero(mask))
    if first is None:
        return None
    value, row, column = first
    pixels = f"{count:,} pixels" if count > 1 else "1 pixel"
    return (
        f"palette index {value} beyond the {entries}-entry palette (row {row}, column {column}; {pixels} out of range)"
    )


def decoded_beyond(im: Any) -> str | None:
    """The first index beyond the palette of the frame Pillow decoded into ``im`` (a loaded Pillow image),
    None when it is no palette image, its palette holds 256 entries (every 8-bit index is defined), or no
    index is beyond it. Pillow keeps a BMP's and a GIF's palette at the entries the file holds. A GIF's
    transparent index is no colour and needs no entry: encoders set it beyond a short palette, and Pillow fills
    the canvas outside the first frame with it."""
    if im.mode != "P" or im.palette is None:
        return None
    colours = im.getpalette() or []
    entries = len(colours) // 3
    if entries == 0 or entries >= 256:
        return None
    import numpy as np  # (here: numpy only for the files that need it; see png.py)

    indices = np.asarray(im)
    transparent = im.info.get("transparency")
    if isinstance(transparent, int) and transparent >= entries:
        indices = np.where(indices == transparent, 0, indices)
    return first_beyond(indices, entries)
