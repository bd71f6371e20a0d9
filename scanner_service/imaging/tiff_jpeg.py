"""JPEG-compressed TIFF pages (compression 7): every strip or tile is a JPEG stream, checked strictly.

libtiff's JPEG codec prints libjpeg's warnings about damaged data ("Corrupt JPEG data: premature end of data
segment") to standard error and goes on, and Pillow hands over the damaged pixels without a word. So the strips
or tiles of such a page are decoded once more by strict libjpeg-turbo at 1/8 scale (as JPEG files are, see
``jpeg.py``), each after the tables the page keeps once for all of them (the JPEGTables tag). Only libjpeg's
warnings count: a stream the TurboJPEG interface refuses by design (12-bit samples) was judged by Pillow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .jpeg import WARNINGS, decode_thumbnail
from .tiff_strips import COMPRESSION, parts

JPEG = 7
JPEG_TABLES = 347
SOI, EOI = b"\xff\xd8", b"\xff\xd9"


def jpeg_damage(data: Any, tags: Mapping[int, Any]) -> str | None:
    """libjpeg's warning about the first damaged strip or tile of a page whose ``tags`` (Pillow's
    ``tag_v2``) say it is JPEG-compressed, as '<strip|tile> N: <warning>'; None when there is none."""
    if tags.get(COMPRESSION) != JPEG:
        return None
    tables = _tables(tags.get(JPEG_TABLES))
    shared = tables[2:-2] if tables.startswith(SOI) and tables.endswith(EOI) else b""
    for kind, i, part in parts(data, tags):
        if not part.startswith(SOI):  # no JPEG stream where the tags point: Pillow's decode judged the page
            continue
        try:
            decode_thumbnail(SOI + shared + part[2:])
        except ValueError as exc:
            reason = str(exc)
            if reason.startswith(WARNINGS):
                return f"{kind} {i}: {reason}"
    return None


def _tables(value: Any) -> bytes:
    """The JPEGTables tag's bytes (UNDEFINED, or BYTE as Pillow's tuple of ints); b"" for a tag of another type:
    an ASCII one is text, and a LONG's ``bytes(n)`` would allocate n zero bytes (2 GB for a fuzzed file)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, tuple) and all(isinstance(x, int) and 0 <= x < 256 for x in value):
        return bytes(value)
    return b""
