"""Where a BMP ends by its own headers (to measure trailing data), and a walk of RLE-compressed pixel data.

A BMP's pixel array starts at the file header's offset (``bfOffBits``). Uncompressed (BI_RGB, BI_BITFIELDS),
it holds ``height`` rows of ``width × bits`` bits, each padded to 4 bytes; RLE8 and RLE4 data (BI_RLE8,
BI_RLE4) ends with its end-of-bitmap code. A V5 header's ICC profile may lie after the pixels. Writers are
not trusted to declare sizes right (``bfSize`` 0 or wrong is common), so the end is the structure's; bytes
after it that the headers still declare (``bfSize``, ``biSizeImage``) are the writer's padding, and so are up
to 3 zero bytes (alignment to 4 bytes).

Pillow's RLE decoder is lenient: a run longer than its row is clipped, an absolute run past the row's end
spills into the next row, rows beyond the height are dropped, a missing end-of-bitmap code goes unnoticed.
``bmp_layout`` walks the RLE codes (pairs of bytes) and names the first such damage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INFO_HEADERS = frozenset({40, 52, 56, 64, 108, 124})
"""Sizes of the Windows info headers Pillow reads (and OS/2 2.x's 64); 12 is the core header."""

RGB, RLE8, RLE4, BITFIELDS, ALPHABITFIELDS = 0, 1, 2, 3, 6
EMBEDDED, LINKED = 0x4D424544, 0x4C494E4B  # a V5 header's CSType: 'MBED', 'LINK' (a profile after the pixels)
ALIGNMENT = 3
"""Zero bytes after the end that are a writer's alignment to 4 bytes, not trailing data."""


@dataclass(slots=True)
class BmpLayout:
    """What a BMP's headers and RLE codes say about where it ends."""

    end: int
    """Offset just past the image's content (pixels, ICC profile, the padding the headers declare)."""
    damage: str | None = None
    """The first damage in RLE data that Pillow decodes on without an error."""


def _u16(data: Any, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "little")


def _u32(data: Any, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "little")


def bmp_layout(data: Any) -> BmpLayout | None:
    """Where the BMP ``data`` ends (and its RLE damage), None when its headers leave it open (no pixel offset,
    a compression Pillow does not read, headers cut short)."""
    n = len(data)
    if n < 26:
        return None
    header, offset = _u32(data, 14), _u32(data, 10)
    if header == 12:
        width, height, bits, compression, image_size = _u16(data, 18), _u16(data, 20), _u16(data, 24), RGB, 0
    elif header in INFO_HEADERS and n >= 14 + 40:
        width = int.from_bytes(data[18:22], "little", signed=True)
        height = int.from_bytes(data[22:26], "little", signed=True)
        bits, compression, image_size = _u16(data, 28), _u32(data, 30), _u32(data, 34)
    else:
        return None
    if 0 < offset < 14 + header:
        return BmpLayout(end=n, damage=_offset_inside(offset, 14 + header))
    if offset < 14 + header or width <= 0 or height == 0:
        return None  # (no offset: Pillow reads the pixels right after the palette; rare enough to leave open)
    damage = None
    if compression in (RGB, BITFIELDS, ALPHABITFIELDS):
        end = offset + (width * bits + 31) // 32 * 4 * abs(height)
    elif compression in (RLE8, RLE4) and height > 0:
        end, damage = _rle(data, offset, width, height, compression == RLE4)
        if damage is None and image_size and offset + image_size > n and _u32(data, 2) != n:
            # codes lost from the middle: the walk finds its way to the end-of-bitmap code, a run short
            damage = (
                f"damaged {'RLE4' if compression == RLE4 else 'RLE8'} data: the headers declare {image_size:,} "
                f"bytes of it, the file holds {n - offset:,} (bytes lost from it: Pillow decodes the rest shifted)"
            )
    else:
        return None
    if header == 124 and _u32(data, 14 + 56) in (EMBEDDED, LINKED):
        end = max(end, 14 + _u32(data, 14 + 112) + _u32(data, 14 + 116))
    declared = [size for size in (_u32(data, 2), offset + image_size) if end < size <= n]
    end = max([end, *declared])
    if 0 < n - end <= ALIGNMENT and not any(data[end:]):
        end = n
    return BmpLayout(end=end, damage=damage)


def _offset_inside(offset: int, headers: int) -> str:
    """The damage of a pixel offset (``bfOffBits``) that points into the headers, which end at ``headers``: Pillow
    reads from there without a word, header bytes as pixels and every row shifted (ImageMagick refuses the file:
    "improper image header"). Where the pixels end is then unknown: no trailing data is measured."""
    return (
        f"the pixel data offset {offset:,} points inside the headers, which end at byte {headers:,} (Pillow reads"
        " header bytes as pixels: every row is shifted)"
    )


def _rle(data: Any, pos: int, width: int, height: int, rle4: bool) -> tuple[int, str | None]:
    """(offset past the end-of-bitmap code (the end of the file without one), the first damage) of the RLE
    codes from ``pos``: pairs (count, value) of runs, and escapes (0, 0) end of line, (0, 1) end of bitmap,
    (0, 2) a move by the two bytes after it, (0, n ≥ 3) n pixels stored as they are, padded to 16 bits."""
    n = len(data)
    x = y = 0
    damage: str | None = None
    padded = (width * (4 if rle4 else 8) + 31) // 32 * (8 if rle4 else 4)  # pixels in a row padded to 4 bytes
    kind = "RLE4" if rle4 else "RLE8"

    def note(text: str) -> None:
        nonlocal damage
        damage = damage or f"damaged {kind} data: {text}"

    while pos + 2 <= n:
        count, value = data[pos], data[pos + 1]
        pos += 2
        if count or value >= 3:  # pixels: a run of ``count``, or ``value`` stored as they are
            pixels = count or value
            if y >= height:
                note(f"pixels beyond the image's {height} rows at byte {pos - 2:,} (Pillow drops them)")
            elif x + pixels > (padded if count else width):  # (ImageMagick runs over a row's padding too)
                spill = "clips the run" if count else "spills the pixels into the next row"
                note(
                    f"a run of {pixels} pixels at row {y}, column {x} overruns the row of {width} pixels at byte "
                    f"{pos - 2:,} (Pillow {spill})"
                )
            x += pixels
            if not count:
                stored = (value + 1) // 2 if rle4 else value
                pos += stored + (stored & 1)
        elif value == 0:
            x, y = 0, y + 1
        elif value == 1:
            return pos, damage
        else:
            if pos + 2 > n:
                break
            x, y = x + data[pos], y + data[pos + 1]
            pos += 2
    if pos > n:
        note(f"the file ends inside a run of pixels stored as they are ({pos - n:,} bytes missing)")
    else:
        note("no end-of-bitmap code: the data ends without it (the file is cut short?)")
    return n, damage
