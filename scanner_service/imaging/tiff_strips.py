"""The strips or tiles of a TIFF page, and the Deflate check libtiff skips.

libtiff's Deflate codec (compression 8, and 32946, its old code) inflates a strip only until the strip's rows
are filled, so the Adler-32 checksum at the end of the zlib stream is never read: bytes overwritten in a strip
(a zeroed block, a bad sector, a bit flip) decode into wrong pixels without a word unless they happen to break
the code structure before the last row. So each strip or tile of such a page is inflated once more, by zlib, to
the end of its stream: a data error there ('incorrect data check', an invalid code) is damage, and so is a
stream that does not end within the strip's bytes (every writer ends it; damage that derails the codes runs
over the end).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from typing import Any

COMPRESSION = 259
DEFLATE = (8, 32946)
STRIPS = (273, 279)
TILES = (324, 325)
STEP = 1 << 20
"""Bytes inflated at a time: memory stays bounded whatever a strip's size."""


def parts(data: Any, tags: Mapping[int, Any]) -> Iterator[tuple[str, int, bytes]]:
    """The strips or tiles of a page whose tags are ``tags`` (Pillow's ``tag_v2``), as ('strip' or 'tile',
    its number, its bytes); none when the tags name none."""
    kind, (offsets_tag, counts_tag) = ("tile", TILES) if tags.get(TILES[0]) is not None else ("strip", STRIPS)
    offsets, counts = tags.get(offsets_tag), tags.get(counts_tag)
    if not offsets or not counts:
        return
    for i, (offset, count) in enumerate(zip(offsets, counts, strict=False)):
        yield kind, i, bytes(data[offset : offset + count])


def deflate_damage(data: Any, tags: Mapping[int, Any]) -> str | None:
    """zlib's reason about the first damaged strip or tile of a Deflate-compressed page, as '<strip|tile> N:
    Deflate data damaged (zlib: <reason>)'; None when there is none (or the page is not Deflate)."""
    if tags.get(COMPRESSION) not in DEFLATE:
        return None
    for kind, i, part in parts(data, tags):
        inflater = zlib.decompressobj()
        rest, out = part, b"-"
        try:
            while (rest or out) and not inflater.eof:  # (output still pending when the input is all read)
                out = inflater.decompress(rest, STEP)
                rest = inflater.unconsumed_tail
        except zlib.error as exc:
            reason = str(exc).rpartition("data: ")[2] or str(exc)
        else:
            if inflater.eof:
                continue
            reason = f"the stream does not end within the {kind}'s {len(part):,} bytes"
        return f"{kind} {i}: Deflate data damaged (zlib: {reason})"
    return None
