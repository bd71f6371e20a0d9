"""Where GIF and WebP files end by their own structure, to measure trailing data and truncation."""

from __future__ import annotations

from typing import Any


def gif_end(data: Any) -> tuple[int, str | None, str | None]:
    """Offset just past the GIF trailer (0x3B), or -1 and what broke the block structure before it: the file
    ends (no trailer), or a byte that starts no block (damage: a decoder stops there, and the frames after it
    are lost without an error). Third, a note on what Pillow skips between blocks, reading every frame after
    it, and giflib refuses: runs of zero bytes (an encoder's stray block terminators), and the header of a
    second GIF appended to a first that lacks its trailer (Pillow reads its frames as more frames). An image
    whose LZW minimum code size is 0 is damage too, named where the block structure holds (a broken structure
    explains more: the frames lost)."""
    n = len(data)
    if n < 13:
        return -1, "the file ends inside the GIF header", None
    packed = data[10]
    pos = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    stray = 0
    first_stray = appended = blank = -1
    while pos < n:
        block = data[pos]
        skip = _appended_header(data, pos) if block == 0x47 else 0  # "G"
        if skip:
            appended = pos if appended < 0 else appended
            pos += skip
            if pos == n:
                break
            block = data[pos]
        if block == 0:
            run = pos
            while run < n and data[run] == 0:
                run += 1
            if run == n or data[run] in (0x21, 0x2C, 0x3B):  # zeros, then the structure goes on (or the end)
                stray += run - pos
                first_stray = pos if first_stray < 0 else first_stray
                pos = run
                if pos == n:
                    break
                block = data[pos]
        note = _stray_note(stray, first_stray, appended)
        if block == 0x3B:
            return (pos + 1, None, note) if blank < 0 else (-1, _no_code_size(blank), note)
        if block == 0x21:
            pos += 2
        elif block == 0x2C:
            if pos + 10 > n:
                return -1, NO_TRAILER if blank < 0 else _no_code_size(blank), note
            local = data[pos + 9]
            start, pos = pos, pos + 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0)  # descriptor, palette
            if pos < n and data[pos] == 0 and blank < 0:
                blank = start
            pos += 1  # the LZW minimum code size
        else:
            return (
                -1,
                f"damaged GIF block structure: byte {pos:,} (0x{block:02x}) starts no block, {n - pos:,} bytes "
                "before the end of the file (the frames after it are lost)",
                note,
            )
        while pos < n:  # data sub-blocks, ended by a zero-length block
            size = data[pos]
            pos += 1 + size
            if size == 0:
                break
    return -1, NO_TRAILER if blank < 0 else _no_code_size(blank), _stray_note(stray, first_stray, appended)


def _no_code_size(image: int) -> str:
    """The damage of an image whose LZW minimum code size is 0 (a writer's is 2 to 8): Pillow decodes it without
    an error into a blank frame, every pixel palette index 0; gifsicle and ImageMagick refuse the file."""
    return (
        f"damaged GIF frame: the image at byte {image:,} declares an LZW minimum code size of 0 (Pillow decodes"
        " it as a blank frame, every pixel palette index 0; gifsicle and ImageMagick refuse it)"
    )


def _appended_header(data: Any, pos: int) -> int:
    """The length of a GIF header (and its global palette) at ``pos``, where a block belongs, when Pillow
    skips it byte by byte to the block after it (none of its bytes starts a block); else 0."""
    if bytes(data[pos : pos + 6]) not in (b"GIF87a", b"GIF89a") or pos + 13 > len(data):
        return 0
    packed = data[pos + 10]
    size = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    header = bytes(data[pos : pos + size])
    if len(header) < size or any(b in header for b in b"!,;"):
        return 0
    return size


def _stray_note(count: int, first: int, appended: int = -1) -> str | None:
    notes = []
    if count:
        zeros = "1 zero byte" if count == 1 else f"{count:,} zero bytes"
        notes.append(f"{zeros} between GIF blocks from byte {first:,} (Pillow skips them; giflib refuses the file)")
    if appended >= 0:
        notes.append(
            f"a second GIF's header at byte {appended:,}, where the first lacks its trailer (Pillow reads the"
            " frames after it as more frames; giflib refuses the file)"
        )
    return "; ".join(notes) or None


NO_TRAILER = "no GIF trailer: the file ends inside or right after the last frame"


def riff_end(data: Any) -> int:
    """Offset just past a RIFF (WebP) container as its header declares it (padded to even)."""
    if len(data) < 8:
        return -1
    size = int.from_bytes(data[4:8], "little") + 8
    return size + (size & 1)
