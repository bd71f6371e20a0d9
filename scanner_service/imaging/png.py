"""PNG: a structural check that is stricter than Pillow and about 3× faster than its ``load()``.

Pillow's ``load()`` never checks the CRC of IDAT chunks and accepts a missing IEND; ``verify()`` checks
CRCs but not the compressed stream. This check does both, and more, without unfiltering pixels:

- the signature, every chunk's length and CRC (ISA-L's crc32), the chunk order rules that matter (IHDR
  first, consecutive IDATs, PLTE for palette images), unknown critical chunks;
- IHDR: size, a valid bit depth for the colour type, known compression, filter and interlace methods;
- the whole zlib stream of IDAT inflated (ISA-L), its size exactly what the header implies, Adam7
  interlacing and bit depth included, and every row's filter type valid;
- every frame of an animated PNG (fcTL/fdAT: sequence numbers, frame size, inflated size);
- IEND present, and any bytes after it (trailing data).

Pixels are looked at only when the compressed data is suspiciously small (a constant image compresses
to almost nothing): then Pillow decodes it to confirm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import deflate
import numpy as np

try:
    from isal import isal_zlib as fast_zlib
except ImportError:  # pragma: no cover
    import zlib as fast_zlib  # type: ignore[no-redef]

from .exif import orientation as exif_orientation
from .sniff import sniff
from .verdict import Verdict

SIGNATURE = b"\x89PNG\r\n\x1a\n"
DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
COLOUR_NAMES = {0: "grayscale", 2: "RGB", 3: "palette", 4: "grayscale+alpha", 6: "RGBA"}
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
"""(x0, y0, dx, dy) of the seven interlacing passes."""
KNOWN_CRITICAL = frozenset({b"IHDR", b"PLTE", b"IDAT", b"IEND"})
CONSTANT_RATIO = 40
"""Compressed data this many times smaller than the raw rows makes an image a constant candidate."""
ZLIB_ERROR: type[Exception] = fast_zlib.error  # type: ignore[assignment]

MAX_CHUNK = (1 << 31) - 1


class PngError(Exception):
    """Damage that makes decoders fail (becomes ``corrupt-image``)."""


@dataclass(slots=True)
class _Header:
    width: int
    height: int
    depth: int
    colour: int
    interlace: int

    @property
    def bits(self) -> int:
        return CHANNELS[self.colour] * self.depth


@dataclass(slots=True)
class _Frame:
    width: int
    height: int
    data: list[Any] = field(default_factory=list)


def _passes(width: int, height: int, interlace: int) -> list[tuple[int, int]]:
    if not interlace:
        return [(width, height)]
    out = []
    for x0, y0, dx, dy in ADAM7:
        pw = (width - x0 + dx - 1) // dx if width > x0 else 0
        ph = (height - y0 + dy - 1) // dy if height > y0 else 0
        if pw and ph:
            out.append((pw, ph))
    return out


def raw_size(width: int, height: int, bits: int, interlace: int) -> int:
    """Bytes of the filtered rows: per row one filter byte plus the packed pixels."""
    return sum(ph * (1 + (pw * bits + 7) // 8) for pw, ph in _passes(width, height, interlace))


def _bad_filter_row(
    raw: bytes | bytearray, width: int, height: int, bits: int, interlace: int
) -> tuple[int, int] | None:
    """(row, filter type) of the first row with a filter type above 4, else None."""
    if not interlace:
        stride = 1 + (width * bits + 7) // 8
        types = raw[::stride]
        if max(types) <= 4:
            return None
        row = next(i for i, t in enumerate(types) if t > 4)
        return row, types[row]
    starts = []
    offset = 0
    for pw, ph in _passes(width, height, interlace):
        stride = 1 + (pw * bits + 7) // 8
        starts.append(np.arange(ph, dtype=np.int64) * stride + offset)
        offset += ph * stride
    index = np.concatenate(starts)
    found = np.frombuffer(raw, np.uint8)[index]
    bad = np.flatnonzero(found > 4)
    if bad.size == 0:
        return None
    return int(bad[0]), int(found[bad[0]])


def _inflate(parts: list[Any], expected: int, what: str, damage: list[str]) -> bytes | bytearray:
    """Inflate a zlib stream split over chunks; exactly ``expected`` bytes or PngError.

    libdeflate inflates a sound stream in one call (about 1.5x ISA-L), and its Adler-32 is checked; a stream
    whose checksum is not its last four bytes (data after it), or that libdeflate refuses, is inflated again
    step by step, which says exactly what is wrong.
    """
    stream = parts[0] if len(parts) == 1 else b"".join(parts)
    try:
        whole = deflate.zlib_decompress(stream, expected)
    except deflate.DeflateError:
        pass
    else:
        if len(whole) == expected and bytes(stream[-4:]) == deflate.adler32(whole).to_bytes(4, "big"):
            return whole
    d = fast_zlib.decompressobj()
    try:
        raw = d.decompress(stream, expected + 1)
    except ZLIB_ERROR as exc:
        raise PngError(f"{what}: invalid compressed data ({exc})") from exc
    if len(raw) > expected:
        damage.append(f"{what}: more image data than the header declares")
        return bytes(raw[:expected])
    if len(raw) < expected:
        state = "the zlib stream ends" if d.eof else "the compressed data ends (truncated)"
        raise PngError(f"{what}: {state} after {len(raw):,} of {expected:,} bytes")
    if not d.eof:
        try:
            tail = d.decompress(d.unconsumed_tail, 1) if d.unconsumed_tail else b""
            tail += d.flush()
        except ZLIB_ERROR as exc:
            raise PngError(f"{what}: invalid compressed data at the end of the stream ({exc})") from exc
        if not d.eof:
            damage.append(f"{what}: the zlib stream is not terminated (no checksum)")
        elif tail:
            damage.append(f"{what}: more image data than the header declares")
    elif d.unused_data:
        damage.append(f"{what}: {len(d.unused_data)} bytes after the end of the zlib stream")
    return bytes(raw)


def _ihdr(body: Any) -> _Header:
    if len(body) != 13:
        raise PngError(f"IHDR has {len(body)} bytes, expected 13")
    width = int.from_bytes(body[0:4], "big")
    height = int.from_bytes(body[4:8], "big")
    depth, colour, compression, filtering, interlace = (int(b) for b in body[8:13])
    if not 0 < width <= MAX_CHUNK or not 0 < height <= MAX_CHUNK:
        raise PngError(f"IHDR declares an invalid size {width}×{height}")
    if colour not in DEPTHS:
        raise PngError(f"IHDR: invalid colour type {colour}")
    if depth not in DEPTHS[colour]:
        raise PngError(f"IHDR: bit depth {depth} is invalid for {COLOUR_NAMES[colour]} images")
    if compression or filtering or interlace > 1:
        raise PngError(f"IHDR: unknown compression {compression}, filter {filtering} or interlace {interlace}")
    return _Header(width, height, depth, colour, interlace)


def _mode(h: _Header) -> str:
    if h.colour == 0:
        return "1" if h.depth == 1 else ("I;16" if h.depth == 16 else "L")
    return {2: "RGB", 3: "P", 4: "LA", 6: "RGBA"}[h.colour]


def _unusual(h: _Header, transparency: bool) -> str | None:
    if h.depth == 16:
        return f"16-bit {COLOUR_NAMES[h.colour]} PNG (uint8 pipelines clip or rescale it)"
    if h.colour == 4:
        return "LA: grayscale with alpha (2 channels)"
    if h.colour == 3 and transparency:
        return "P with transparency: a palette image whose alpha convert('RGB') drops"
    return None


def inspect_png(data: Any, verdict: Verdict, max_pixels: int, constant_value: Callable[[Any], str | None]) -> None:
    """Fill ``verdict`` for PNG bytes. ``constant_value(data)`` decodes a candidate to confirm constancy."""
    verdict.judge = "png"
    try:
        _check(data, verdict, max_pixels, constant_value)
    except PngError as exc:
        verdict.error = str(exc)


def _check(data: Any, v: Verdict, max_pixels: int, constant_value: Callable[[Any], str | None]) -> None:
    mv = memoryview(data)
    n = len(mv)
    crc32 = fast_zlib.crc32
    head: _Header | None = None
    idat: list[Any] = []
    frames: list[_Frame] = []
    frame_count: int | None = None
    sequence = 0
    palette = transparency = False
    idat_state = 0  # 0 before IDAT, 1 inside the IDAT run, 2 after it
    pos = 8
    end_of_image = -1
    while pos < n:
        if pos + 8 > n:
            raise PngError(f"truncated: the file ends inside a chunk header at byte {pos:,} (no IEND)")
        length = int.from_bytes(mv[pos : pos + 4], "big")
        ctype = bytes(mv[pos + 4 : pos + 8])
        name = ctype.decode("latin-1")
        if not ctype.isalpha() or not ctype.isascii():
            raise PngError(f"invalid chunk type {ctype!r} at byte {pos:,}")
        if length > MAX_CHUNK:
            raise PngError(f"{name} chunk at byte {pos:,} declares an invalid length {length:,}")
        end = pos + 12 + length
        if end > n:
            raise PngError(
                f"truncated: the {name} chunk at byte {pos:,} needs {length:,} bytes, {n - pos - 8:,} remain"
            )
        if crc32(mv[pos + 4 : end - 4]) != int.from_bytes(mv[end - 4 : end], "big"):
            raise PngError(f"bad CRC in the {name} chunk at byte {pos:,}")
        body = mv[pos + 8 : end - 4]
        if head is None and ctype != b"IHDR":
            raise PngError(f"the first chunk is {name}, not IHDR")
        if ctype == b"IDAT":
            if idat_state == 2:
                raise PngError("IDAT chunks are not consecutive")
            idat_state = 1
            idat.append(body)
            if frames and len(frames) == 1 and not frames[0].data:
                frames[0].data = idat  # an fcTL before IDAT makes the default image frame 0
        else:
            if idat_state == 1:
                idat_state = 2
            if ctype == b"IHDR":
                if head is not None:
                    raise PngError("more than one IHDR chunk")
                head = _ihdr(body)
                v.width, v.height = head.width, head.height
                if head.width * head.height > max_pixels:
                    v.bomb = (
                        f"{head.width}×{head.height} = {head.width * head.height:,} pixels declared"
                        f" (limit {max_pixels:,})"
                    )
                    return
            elif ctype == b"PLTE":
                if len(body) % 3 or not 0 < len(body) <= 768:
                    raise PngError(f"PLTE has {len(body)} bytes (a multiple of 3, at most 768)")
                palette = True
            elif ctype == b"tRNS":
                transparency = True
            elif ctype == b"eXIf":
                v.orientation = exif_orientation(body)
            elif ctype == b"acTL" and len(body) == 8:
                frame_count = int.from_bytes(body[0:4], "big")
            elif ctype == b"fcTL":
                sequence = _sequence(body, sequence, "fcTL")
                frames.append(_fctl(body, head))
            elif ctype == b"fdAT":
                sequence = _sequence(body, sequence, "fdAT")
                if not frames:
                    raise PngError("APNG: fdAT before any fcTL")
                frames[-1].data.append(body[4:])
            elif ctype == b"IEND":
                end_of_image = end
                break
            elif ctype not in KNOWN_CRITICAL and 65 <= ctype[0] <= 90:
                raise PngError(f"unknown critical chunk {name}")
        pos = end
    if head is None:
        raise PngError("no IHDR chunk")
    if not idat:
        raise PngError("no image data (IDAT)")
    if head.colour == 3 and not palette:
        raise PngError("palette image without a PLTE chunk")
    if end_of_image < 0:
        raise PngError("truncated: no IEND chunk")
    v.mode = _mode(head)
    raw = _inflate(idat, raw_size(head.width, head.height, head.bits, head.interlace), "IDAT", v.damage)
    bad = _bad_filter_row(raw, head.width, head.height, head.bits, head.interlace)
    if bad is not None:
        raise PngError(f"IDAT: invalid filter type {bad[1]} in row {bad[0]}")
    if frames:
        _check_frames(frames, frame_count, head, idat, v.damage)
        v.frames = len(frames)
    v.unusual = _unusual(head, transparency)
    total = sum(len(p) for p in idat)
    if total * CONSTANT_RATIO < len(raw) or len(raw) <= 4096:
        v.constant = constant_value(data)
    extra = n - end_of_image
    if extra > 0:
        v.trailing = extra
        tail = mv[end_of_image : end_of_image + 64]
        kind = sniff(tail)
        if kind is not None:
            v.trailing_what = f"another {kind.upper()} image (concatenated files?)"
        elif not bytes(mv[end_of_image:]).strip(b"\x00"):
            v.trailing_what = "zero bytes (padding)"
        else:
            v.trailing_what = "unknown data"


def _sequence(body: Any, expected: int, name: str) -> int:
    if len(body) < 4:
        raise PngError(f"APNG: {name} chunk too short")
    seq = int.from_bytes(body[0:4], "big")
    if seq != expected:
        raise PngError(f"APNG: {name} has sequence number {seq}, expected {expected}")
    return expected + 1


def _fctl(body: Any, head: _Header | None) -> _Frame:
    if len(body) != 26 or head is None:
        raise PngError("APNG: malformed fcTL chunk")
    width = int.from_bytes(body[4:8], "big")
    height = int.from_bytes(body[8:12], "big")
    x = int.from_bytes(body[12:16], "big")
    y = int.from_bytes(body[16:20], "big")
    if not width or not height or x + width > head.width or y + height > head.height:
        raise PngError(f"APNG: frame {width}×{height} at ({x}, {y}) outside the {head.width}×{head.height} canvas")
    return _Frame(width, height)


def _check_frames(frames: list[_Frame], count: int | None, head: _Header, idat: list[Any], damage: list[str]) -> None:
    if count is not None and count != len(frames):
        raise PngError(f"APNG: acTL declares {count} frames, the file has {len(frames)}")
    for i, frame in enumerate(frames):
        if frame.data is idat:
            continue  # the default image, checked already
        if not frame.data:
            raise PngError(f"APNG: frame {i} has no data")
        expected = raw_size(frame.width, frame.height, head.bits, head.interlace)
        raw = _inflate(frame.data, expected, f"APNG frame {i}", damage)
        bad = _bad_filter_row(raw, frame.width, frame.height, head.bits, head.interlace)
        if bad is not None:
            raise PngError(f"APNG frame {i}: invalid filter type {bad[1]} in row {bad[0]}")
