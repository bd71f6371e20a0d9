"""The EXIF orientation tag, read from a TIFF-structured EXIF block without decoding anything else; and the
orientation an XMP packet holds, which Pillow's getexif() takes when EXIF has none."""

from __future__ import annotations

import re
import struct

ORIENTATION_TAG = 0x0112

ORIENTATION_TEXT = {
    2: "mirroring left to right",
    3: "rotating 180°",
    4: "mirroring top to bottom",
    5: "transposing (mirrored along the main diagonal)",
    6: "rotating 90° clockwise",
    7: "transversing (mirrored along the other diagonal)",
    8: "rotating 90° counter-clockwise",
}
"""What the stored pixels need to be shown upright (what ImageOps.exif_transpose does)."""

VALUE_FORMATS = {1: "B", 3: "H", 4: "I", 6: "b", 8: "h", 9: "i"}
"""struct formats of the integer TIFF types (BYTE, SHORT, LONG, SBYTE, SSHORT, SLONG): an orientation
stored in any of them is read by Pillow's getexif(), and so applied by exif_transpose."""


XMP_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"
"""How a JPEG's APP1 segment that holds an XMP packet starts."""
XMP_KEYWORD = b"XML:com.adobe.xmp"
"""The keyword of a PNG text chunk that holds an XMP packet."""
_XMP_ORIENTATION = re.compile(rb'tiff:Orientation(="|>)([0-9])')
"""Pillow's own pattern (Image.getexif): an attribute or an element."""


def xmp_orientation(xmp: bytes) -> int | None:
    """The orientation an XMP packet gives (``tiff:Orientation``), as Pillow's getexif() reads it; None if none."""
    found = _XMP_ORIENTATION.search(xmp)
    return int(found[2]) if found else None


def orientation(tiff: bytes | memoryview) -> int | None:
    """The orientation (1-8) in IFD0 of an EXIF block starting with its TIFF header; None if absent or bad."""
    if len(tiff) < 8:
        return None
    order = bytes(tiff[:2])
    if order == b"II":
        endian = "<"
    elif order == b"MM":
        endian = ">"
    else:
        return None
    try:
        (magic, ifd) = struct.unpack_from(endian + "HI", tiff, 2)
        if magic != 42 or ifd + 2 > len(tiff):
            return None
        (count,) = struct.unpack_from(endian + "H", tiff, ifd)
        pos = ifd + 2
        for _ in range(min(count, 512)):
            if pos + 12 > len(tiff):
                return None
            tag, typ, n = struct.unpack_from(endian + "HHI", tiff, pos)
            if tag == ORIENTATION_TAG:
                if n < 1 or typ not in VALUE_FORMATS:
                    return None
                # SHORT as the standard says; LONG and the others as Pillow's getexif() reads them too
                (value,) = struct.unpack_from(endian + VALUE_FORMATS[typ], tiff, pos + 8)
                return int(value)
            pos += 12
    except struct.error:
        return None
    return None
