"""Where GIF and WebP files end by their own structure, to measure trailing data and truncation."""

from __future__ import annotations

from typing import Any


def gif_end(data: Any) -> tuple[int, str | None]:
    """Offset just past the GIF trailer (0x3B), or -1 and what broke the block structure before it: the file
    ends (no trailer), or a byte that starts no block (damage: a decoder stops there, and the frames after it
    are lost without an error)."""
    n = len(data)
    if n < 13:
        return -1, "the file ends inside the GIF header"
    packed = data[10]
    pos = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    while pos < n:
        block = data[pos]
        if block == 0x3B:
            return pos + 1, None
        if block == 0x21:
            pos += 2
        elif block == 0x2C:
            if pos + 10 > n:
                return -1, NO_TRAILER
            local = data[pos + 9]
            pos += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1  # descriptor, palette, LZW size
        else:
            return -1, (
                f"damaged GIF block structure: byte {pos:,} (0x{block:02x}) starts no block, {n - pos:,} bytes "
                "before the end of the file (the frames after it are lost)"
            )
        while pos < n:  # data sub-blocks, ended by a zero-length block
            size = data[pos]
            pos += 1 + size
            if size == 0:
                break
    return -1, NO_TRAILER


NO_TRAILER = "no GIF trailer: the file ends inside or right after the last frame"


def riff_end(data: Any) -> int:
    """Offset just past a RIFF (WebP) container as its header declares it (padded to even)."""
    if len(data) < 8:
        return -1
    size = int.from_bytes(data[4:8], "little") + 8
    return size + (size & 1)
