"""The strips or tiles of a TIFF page, and the Deflate check libtiff skips.

libtiff's Deflate codec (compression 8, and 32946, its old code) inflates a strip only until the strip's rows
are filled, so the Adler-32 checksum at the end of the zlib stream is never read: bytes overwritten in a strip
(a zeroed block, a bad sector, a bit flip) decode into wrong pixels without a word unless they happen to break
the code structure before the last row. So each strip or tile of such a page is inflated once more, by zlib, to
the end of its stream: a data error there ('incorrect data check', an invalid code) is damage, and so is a
stream that does not end within the strip's bytes (every writer ends it; damage that derails the codes runs
over the end).

PackBits (compression 32773) has no checksum either, and libtiff stops unpacking a strip when its rows are
filled: a run header overwritten into a longer run shifts every byte after it, and the surplus it produces
is dropped without a word (only a strip that falls short is an error). So each strip or tile of such a page
is unpacked to its end (counted, not stored): unpacked sizes other than the rows' are damage.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

COMPRESSION = 259
DEFLATE = (8, 32946)
PACKBITS = 32773
WIDTH, HEIGHT, BITS, SAMPLES, ROWS_PER_STRIP, PLANAR, PHOTOMETRIC = 256, 257, 258, 277, 278, 284, 262
TILE_WIDTH, TILE_LENGTH = 322, 323
YCBCR = 6
STRIPS = (273, 279)
TILES = (324, 325)
STEP = 1 << 20
"""Bytes inflated at a time: memory stays bounded whatever a strip's size."""
MAX_INFLATED = 1 << 28
"""Bytes inflated at most from a strip whose size the tags leave open."""


def parts(data: Any, tags: Mapping[int, Any]) -> Iterator[tuple[str, int, bytes]]:
    """The strips or tiles of a page whose tags are ``tags`` (Pillow's ``tag_v2``), as ('strip' or 'tile',
    its number, its bytes); none when the tags name none."""
    kind, (offsets_tag, counts_tag) = ("tile", TILES) if tags.get(TILES[0]) is not None else ("strip", STRIPS)
    offsets, counts = tags.get(offsets_tag), tags.get(counts_tag)
    if not offsets or not counts:
        return
    seen: set[tuple[int, int]] = set()
    for i, (offset, count) in enumerate(zip(offsets, counts, strict=False)):
        if (offset, count) in seen:  # strips that share their bytes (a crafted file: 16 of one zlib bomb)
            continue
        seen.add((offset, count))
        yield kind, i, bytes(data[offset : offset + count])


def deflate_damage(data: Any, tags: Mapping[int, Any]) -> str | None:
    """zlib's reason about the first damaged strip or tile of a Deflate-compressed page, as '<strip|tile> N:
    Deflate data damaged (zlib: <reason>)'; None when there is none (or the page is not Deflate)."""
    if tags.get(COMPRESSION) not in DEFLATE:
        return None
    sizes = _part_sizes(tags)
    for kind, i, part in parts(data, tags):
        inflater = zlib.decompressobj()
        rest, out = part, b"-"
        # libtiff inflates what the strip's rows hold and no more: so does this (a zlib bomb in a strip would
        # take minutes of CPU here, where Pillow's decode takes none)
        left = (sizes(i)[2] * sizes(i)[1] if sizes is not None else MAX_INFLATED) + STEP
        try:
            while (rest or out) and not inflater.eof and left > 0:  # (output still pending when the input is read)
                out = inflater.decompress(rest, STEP)
                rest = inflater.unconsumed_tail
                left -= len(out)
        except zlib.error as exc:
            reason = str(exc).rpartition("data: ")[2] or str(exc)
        else:
            if inflater.eof or left <= 0:
                continue
            reason = f"the stream does not end within the {kind}'s {len(part):,} bytes"
        return f"{kind} {i}: Deflate data damaged (zlib: {reason})"
    return None


def packbits_damage(data: Any, tags: Mapping[int, Any]) -> str | None:
    """'<strip|tile> N: PackBits data unpacks to X bytes, not the Y of its R rows (...)' for the first strip or
    tile of a PackBits page whose data unpacks to another size than its rows hold; None when none does (or
    the page is not PackBits, or its layout is one this does not size: YCbCr subsampling)."""
    if tags.get(COMPRESSION) != PACKBITS or tags.get(PHOTOMETRIC) == YCBCR:
        return None
    sizes = _part_sizes(tags)
    if sizes is None:
        return None
    for kind, i, part in parts(data, tags):
        rows, row_bytes, full_rows = sizes(i)
        expected = rows * row_bytes
        got = _unpacked_size(part)
        if got == expected or got == full_rows * row_bytes:  # (a last strip written with all its rows: fine)
            continue
        more = "drops the surplus" if got > expected else "lacks data for the rows left"
        return (
            f"{kind} {i}: PackBits data unpacks to {got:,} bytes, not the {expected:,} of its {rows:,} rows "
            f"(libtiff {more}: a damaged run header shifts every byte after it)"
        )
    return None


def _part_sizes(tags: Mapping[int, Any]) -> Callable[[int], tuple[int, int, int]] | None:
    """A function of a strip's or tile's number giving (its rows, bytes per row, rows of a full one), None when
    the tags leave the layout open."""
    width, height = tags.get(WIDTH), tags.get(HEIGHT)
    bits, samples = tags.get(BITS, 1), int(tags.get(SAMPLES, 1) or 1)
    if not isinstance(width, int) or not isinstance(height, int) or width <= 0 or height <= 0:
        return None
    per_sample = tuple(bits) if isinstance(bits, tuple | list) else (bits,)
    if not per_sample or not all(isinstance(b, int) and b > 0 for b in per_sample):
        return None
    if tags.get(PLANAR, 1) == 2:
        pixel_bits = per_sample[0]  # separate planes: a strip holds one sample of each pixel
    else:
        pixel_bits = sum(per_sample) if len(per_sample) == samples else per_sample[0] * samples
    tile_width, tile_length = tags.get(TILE_WIDTH), tags.get(TILE_LENGTH)
    if tags.get(TILES[0]) is not None:
        if not isinstance(tile_width, int) or not isinstance(tile_length, int):
            return None
        tile_row = (tile_width * pixel_bits + 7) // 8
        return lambda i: (tile_length, tile_row, tile_length)
    per_strip = min(int(tags.get(ROWS_PER_STRIP, height) or height), height)
    row_bytes = (width * pixel_bits + 7) // 8
    strips = -(-height // per_strip)  # strips per plane (separate planes repeat them per sample)

    def strip(i: int) -> tuple[int, int, int]:
        return min(per_strip, height - i % strips * per_strip), row_bytes, per_strip

    return strip


def _unpacked_size(part: bytes) -> int:
    """The bytes PackBits ``part`` unpacks to, counted as libtiff reads its headers (n < 128: n + 1 bytes as
    they are; n > 128: the next byte 257 - n times; 128: nothing), a run cut by the end of the part counted as
    far as it goes. One step per header: at most half as many as the part's bytes."""
    pos, out, n = 0, 0, len(part)
    while pos < n:
        header = part[pos]
        pos += 1
        if header < 128:
            out += min(header + 1, n - pos)
            pos += header + 1
        elif header > 128 and pos < n:
            out += 257 - header
            pos += 1
    return out
