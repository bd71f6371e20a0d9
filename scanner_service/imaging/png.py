"""PNG: a structural check that is stricter than Pillow and about 3× faster than its ``load()``.

Pillow's ``load()`` never checks the CRC of IDAT chunks and accepts a missing IEND; ``verify()`` checks
CRCs but not the compressed stream. This check does both, and more, without unfiltering pixels:

- the signature, every chunk's length and CRC (ISA-L's crc32), the chunk order rules that matter (IHDR
  first, consecutive IDATs, PLTE for palette images), unknown critical chunks;
- IHDR: size, a valid bit depth for the colour type, known compression, filter and interlace methods;
- the whole zlib stream of IDAT inflated (ISA-L), its size exactly what the header implies, Adam7
  interlacing and bit depth included, and every row's filter type valid;
- every frame of an animated PNG (fcTL/fdAT: sequence numbers, frame size, inflated size);
- IEND present and empty (a body is judged as a damaged ancillary chunk is), and any bytes after it
  (trailing data);
- palette indices beyond the PLTE entries (``_beyond_palette``), where the palette is shorter than the bit
  depth can index;
- the contents of the standard ancillary chunks (``_Ancillary``): their lengths and values, the chunks
  that may appear once, the places the spec gives them (before IDAT, before or after PLTE), and Pillow's
  own limits on compressed text and ICC profiles. Only these small chunks are read, never IDAT again.

Damage in the ancillary chunks is judged by the loader, as ``jpeg.py`` does for damaged JPEG data: Pillow
decodes the file; where it fails (a short gAMA: "Truncated gAMA chunk"), the file is an error stating the
spec's rule and Pillow's reason, where it still loads the image, the problem is kept as damage.

Pixels are looked at only when the compressed data is suspiciously small (a constant image compresses
to almost nothing) or stored uncompressed: then Pillow decodes it to confirm; and for the palette indices
of a short palette in filtered rows, which Pillow decodes too.

numpy is imported only for the files that need it (interlaced rows, short palettes), as in ``pillow.py`` and
``palette.py``: the head start (``scanner_service.head_start``) judges a folder of PNGs (or of WebP, BMP, TIFF
images) without it, 0.05-0.13 s sooner.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

try:
    from isal import isal_zlib as fast_zlib
except ImportError:  # pragma: no cover
    import zlib as fast_zlib  # type: ignore[no-redef]

from .exif import XMP_KEYWORD, xmp_orientation
from .exif import orientation as exif_orientation
from .palette import beyond_in_blocks, first_beyond
from .sniff import trailing_kind
from .verdict import Verdict

if TYPE_CHECKING:
    import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
COLOUR_NAMES = {0: "grayscale", 2: "RGB", 3: "palette", 4: "grayscale+alpha", 6: "RGBA"}
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
"""(x0, y0, dx, dy) of the seven interlacing passes."""
KNOWN_CRITICAL = frozenset({b"IHDR", b"PLTE", b"IDAT", b"IEND"})
PALETTE_BLOCK = 4 << 20
"""Pixels of palette indices unpacked at a time, in search of one beyond the palette."""
CONSTANT_RATIO = 40
"""Compressed data this many times smaller than the raw rows makes an image a constant candidate."""
ZLIB_ERROR: type[Exception] = fast_zlib.error  # type: ignore[assignment]

MAX_CHUNK = (1 << 31) - 1

SINGLE = frozenset(
    {b"PLTE", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"bKGD", b"hIST", b"pHYs", b"tIME", b"eXIf"}
    | {b"acTL"}
)
"""Chunks the spec allows at most once."""
BEFORE_IDAT = frozenset(
    {b"PLTE", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"bKGD", b"hIST", b"pHYs", b"sPLT", b"acTL"}
)
BEFORE_PLTE = frozenset({b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT"})
AFTER_PLTE = frozenset({b"tRNS", b"bKGD"})
"""In palette images (hIST needs a PLTE before it in any image)."""
FIXED_LENGTH = {b"gAMA": 4, b"cHRM": 32, b"sRGB": 1, b"pHYs": 9, b"tIME": 7, b"acTL": 8}
SBIT_LENGTH = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}
BKGD_LENGTH = {0: 2, 2: 6, 3: 1, 4: 2, 6: 6}
TRNS_LENGTH = {0: 2, 2: 6}
TIFF_HEADERS = (b"II*\x00", b"MM\x00*")
KEYWORD_CHARS = bytes([*range(32, 127), *range(161, 256)])
"""What a keyword may hold: printable Latin-1 (no leading, trailing or consecutive spaces either)."""


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
    offset = row = 0
    for pw, ph in _passes(width, height, interlace):  # (rows numbered through the passes, in the data's order)
        stride = 1 + (pw * bits + 7) // 8
        types = raw[offset : offset + ph * stride : stride]  # one byte a row (positions of 8 bytes: 9x the data)
        if types and max(types) > 4:
            first = next(i for i, t in enumerate(types) if t > 4)
            return row + first, types[first]
        offset += ph * stride
        row += ph
    return None


def _beyond_palette(data: Any, raw: bytes | bytearray, head: _Header, entries: int) -> str | None:
    """The first pixel whose palette index is beyond the PLTE's ``entries`` (libpng warns, Pillow decodes it to
    an undefined colour), else None; only asked where the palette is shorter than the bit depth can index.

    Unfiltered rows (filter type 0 throughout, as Pillow writes 8-bit palettes) are read as they are; else
    Pillow's decoded indices are (unfiltering here would cost as much as decoding)."""
    import numpy as np  # (here: see the module's note)

    width, height, depth = head.width, head.height, head.depth
    stride = 1 + (width * depth + 7) // 8
    packed = np.frombuffer(raw, np.uint8)
    if not head.interlace and not packed[::stride].any():
        if depth == 8 and int(packed.max()) < entries:  # the filter bytes are 0: the maximum is the pixels'
            return None
        rows = packed.reshape(height, stride)[:, 1:]
        step = max(1, PALETTE_BLOCK // max(1, stride * 8 // depth))  # rows unpacked at a time: bounded memory

        def blocks() -> Iterator[tuple[int, np.ndarray[Any, Any]]]:
            for r in range(0, height, step):
                indices: np.ndarray[Any, Any] = rows[r : r + step]
                if depth < 8:  # the pixels packed in each byte, high bits first (the padding bits cut off below)
                    shifts = np.arange(8 - depth, -1, -depth, dtype=np.uint8)
                    indices = ((indices[:, :, None] >> shifts) & ((1 << depth) - 1)).reshape(len(indices), -1)
                yield r, indices[:, :width]

        beyond = beyond_in_blocks(blocks(), entries)
    else:
        from .pillow import palette_indices  # Pillow is imported only for these files

        decoded = palette_indices(data)
        if decoded is None:
            return None
        beyond = first_beyond(decoded, entries)
    return None if beyond is None else f"IDAT: {beyond}"


def _inflate(parts: list[Any], expected: int, what: str, damage: list[str]) -> bytes | bytearray:
    """Inflate a zlib stream split over chunks; exactly ``expected`` bytes or PngError.

    One call of ISA-L's inflate (on these streams, photographs' IDAT, 1.25x libdeflate and 1.8x zlib) with
    the output capped one byte past ``expected``: its end-of-stream state and the bytes it did not use say
    exactly what is wrong with a damaged stream.
    """
    stream = parts[0] if len(parts) == 1 else b"".join(parts)
    _window(stream[0] if len(stream) else None, what)
    d = fast_zlib.decompressobj()
    try:
        raw = d.decompress(stream, expected + 1)
    except ZLIB_ERROR as exc:
        raise PngError(f"{what}: invalid compressed data ({exc})") from exc
    if len(raw) > expected:
        damage.append(f"{what}: more image data than the header declares")
        return bytes(raw[:expected])
    if len(raw) < expected:
        raise _short(d, len(raw), expected, what)
    _finish(d, [d.unconsumed_tail], what, damage)
    return bytes(raw)


def _window(first: int | None, what: str) -> None:
    """ISA-L ignores the window size in the zlib header; zlib (Pillow, libpng) refuses one above 32 KB."""
    if first is not None and first >> 4 > 7:
        raise PngError(f"{what}: invalid compressed data (the zlib header declares a window above 32 KB)")


def _short(d: Any, done: int, expected: int, what: str) -> PngError:
    state = "the zlib stream ends" if d.eof else "the compressed data ends (truncated)"
    return PngError(f"{what}: {state} after {done:,} of {expected:,} bytes")


def _finish(d: Any, rest: Iterable[Any], what: str, damage: list[str]) -> None:
    """What follows the expected bytes of the stream ``d`` inflated (``rest``: its input not given to ``d`` yet):
    bytes after its end, no checksum, or more image data than declared."""
    if d.eof:
        after = len(d.unused_data) + sum(len(part) for part in rest)
        if after:
            damage.append(f"{what}: {after} bytes after the end of the zlib stream")
        return
    more = False
    try:
        for part in rest:
            while not d.eof and not more:  # (ISA-L may keep inflated bytes back: asked again, with no input)
                more = bool(d.decompress(part, 1))
                moved = more or len(d.unconsumed_tail) < len(part)
                part = d.unconsumed_tail
                if not moved:
                    break
            if more or d.eof:
                break
        more = bool(d.flush()) or more
    except ZLIB_ERROR as exc:
        raise PngError(f"{what}: invalid compressed data at the end of the stream ({exc})") from exc
    if not d.eof:
        damage.append(f"{what}: the zlib stream is not terminated (no checksum)")
    elif more:
        damage.append(f"{what}: more image data than the header declares")


STREAM_BYTES = 16 << 20
"""Image data above this size (inflated) is checked a piece of this size at a time, unless the palette check
needs all of it (a palette shorter than the bit depth can index): a 20,000×20,000 RGB image held 1.2 GB."""


IN_BYTES = 1 << 20
"""Compressed bytes handed to the inflater at a time when the data is checked in pieces."""


def _inputs(parts: list[Any]) -> Iterator[Any]:
    """The IDAT chunks' bodies in slices of at most ``IN_BYTES`` (views: nothing is copied)."""
    for part in parts:
        for at in range(0, len(part), IN_BYTES):
            yield part[at : at + IN_BYTES]


def _row_runs(width: int, height: int, bits: int, interlace: int) -> list[tuple[int, int, int, int]]:
    """(first byte, bytes, stride, first row) of each run of rows of one length in the inflated data: the
    image, or each pass of an interlaced one (rows numbered through the passes, in the data's order)."""
    runs, at, row = [], 0, 0
    for pw, ph in _passes(width, height, interlace):
        stride = 1 + (pw * bits + 7) // 8
        runs.append((at, ph * stride, stride, row))
        at += ph * stride
        row += ph
    return runs


def _bad_filter_in(out: Any, done: int, runs: list[tuple[int, int, int, int]]) -> tuple[int, int] | None:
    """(row, filter type) of the first filter type above 4 in ``out``, the inflated bytes from ``done`` on."""
    end = done + len(out)
    view = memoryview(out)
    for at, size, stride, row in runs:
        lo, hi = max(at, done), min(at + size, end)
        if lo >= hi:
            continue
        first = at + -(-(lo - at) // stride) * stride  # the first filter byte at or after lo
        types = view[first - done : hi - done : stride]
        if len(types) and max(types) > 4:
            k = next(i for i, t in enumerate(types) if t > 4)
            return row + (first - at) // stride + k, types[k]
    return None


def _inflate_rows(
    parts: list[Any], expected: int, runs: list[tuple[int, int, int, int]], what: str, damage: list[str]
) -> tuple[int, int] | None:
    """``_inflate`` and ``_bad_filter_row`` of the rows ``runs`` lays out, a piece of at most ``STREAM_BYTES``
    inflated at a time from at most ``IN_BYTES`` of the chunks: the same verdicts (the same errors, the same
    damage), without the whole image or a copy of its compressed data."""
    _window(next((part[0] for part in parts if len(part)), None), what)
    d = fast_zlib.decompressobj()
    piece = max(1, STREAM_BYTES)
    done, bad = 0, None
    inputs = _inputs(parts)
    pending: Any = b""
    try:
        for pending in inputs:
            while done <= expected and not d.eof:  # (ISA-L may keep inflated bytes back: asked again, no input)
                out = d.decompress(pending, min(piece, expected + 1 - done))
                moved = bool(out) or len(d.unconsumed_tail) < len(pending)
                pending = d.unconsumed_tail
                if bad is None and out:
                    bad = _bad_filter_in(out, done, runs)
                done += len(out)
                if not moved:  # (it needs the next input)
                    break
            if done > expected or d.eof:
                break
    except ZLIB_ERROR as exc:
        raise PngError(f"{what}: invalid compressed data ({exc})") from exc
    if done > expected:
        damage.append(f"{what}: more image data than the header declares")
        return bad
    if done < expected:
        raise _short(d, done, expected, what)
    _finish(d, itertools.chain([pending], inputs), what, damage)
    return bad


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


class Fallback(Protocol):
    """Pillow's judge of the whole file; ``constant=False`` for a second opinion on damage only."""

    def __call__(self, data: Any, verdict: Verdict, constant: bool = True) -> None: ...


def inspect_png(
    data: Any,
    verdict: Verdict,
    max_pixels: int,
    constant_value: Callable[[Any], str | None],
    pillow_fallback: Fallback,
) -> None:
    """Fill ``verdict`` for PNG bytes. ``constant_value(data)`` decodes a candidate to confirm constancy;
    ``pillow_fallback(data, verdict)`` (Pillow's full judge) decides what damaged ancillary chunks do."""
    verdict.judge = "png"
    try:
        _check(data, verdict, max_pixels, constant_value, pillow_fallback)
    except PngError as exc:
        verdict.error = str(exc)


def _check(
    data: Any, v: Verdict, max_pixels: int, constant_value: Callable[[Any], str | None], fallback: Fallback
) -> None:
    mv = memoryview(data)
    n = len(mv)
    crc32 = fast_zlib.crc32
    head: _Header | None = None
    anc: _Ancillary | None = None
    idat: list[Any] = []
    frames: list[_Frame] = []
    frame_count: int | None = None
    animated = False  # an acTL chunk: without one, fcTL and fdAT are ancillary chunks every loader skips
    early_fctl: list[Any] = []  # fcTL chunks before acTL (and before IDAT)
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
            left = max(n - pos - 8, 0)
            raise PngError(
                f"truncated: the {name} chunk at byte {pos:,} needs {length + 4:,} bytes after its type "
                f"({length:,} of data and a 4-byte CRC), {left:,} remain"
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
                anc = _Ancillary(head)
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
                v.orientation = exif_orientation(exif_tiff(body))
            elif ctype == b"acTL" and len(body) >= 8:
                animated = True
                frame_count = int.from_bytes(body[0:4], "big") or None  # 0 frames: _Ancillary's problem
                for early in early_fctl:  # the APNG spec orders acTL and fcTL only before IDAT, not between them
                    sequence = _sequence(early, sequence, "fcTL")
                    frames.append(_fctl(early, head))
            elif ctype == b"fcTL" and animated:
                sequence = _sequence(body, sequence, "fcTL")
                frames.append(_fctl(body, head))
            elif ctype == b"fcTL" and idat_state == 0:
                early_fctl.append(body)  # (frame 0's, before acTL: taken when acTL comes, else ancillary)
            elif ctype == b"fdAT" and animated:
                sequence = _sequence(body, sequence, "fdAT")
                if not frames:
                    raise PngError("APNG: fdAT before any fcTL")
                frames[-1].data.append(body[4:])
            elif ctype == b"IEND":
                if len(body) and anc is not None:
                    anc.problems.append(f"IEND chunk carries {_size(len(body))} (the PNG spec says 0)")
                end_of_image = end
                break
            elif ctype not in KNOWN_CRITICAL and 65 <= ctype[0] <= 90:
                raise PngError(f"unknown critical chunk {name}")
            if anc is not None and ctype in CHECKS:
                anc.check(ctype, body, idat_state != 0)
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
    expected = raw_size(head.width, head.height, head.bits, head.interlace)
    short_palette = anc is not None and head.colour == 3 and anc.palette < 1 << head.depth
    if expected > STREAM_BYTES and not short_palette:  # (the palette check needs the data whole)
        runs = _row_runs(head.width, head.height, head.bits, head.interlace)
        bad = _inflate_rows(idat, expected, runs, "IDAT", v.damage)
    else:
        raw = _inflate(idat, expected, "IDAT", v.damage)
        bad = _bad_filter_row(raw, head.width, head.height, head.bits, head.interlace)
    if bad is not None:
        raise PngError(f"IDAT: invalid filter type {bad[1]} in row {bad[0]}")
    if anc is not None and short_palette:
        beyond = _beyond_palette(data, raw, head, anc.palette)
        if beyond is not None:
            v.damage.append(beyond)
    if frames:
        _check_frames(frames, frame_count, head, idat, v.damage, anc.problems if anc is not None else v.damage)
        v.frames = len(frames)
    if anc is not None:
        if v.orientation is None and anc.xmp_orientation is not None:  # (EXIF first, as Pillow's getexif())
            v.orientation, v.orientation_xmp = anc.xmp_orientation, True
        anc.finish()
        if anc.problems or anc.limits:
            _loader_decides(data, v, anc, fallback)
            if v.error is not None:
                return
    v.unusual = _unusual(head, transparency)
    total = sum(len(p) for p in idat)
    if total * CONSTANT_RATIO < expected or expected <= 4096 or _stored(idat):
        v.constant = constant_value(data)
    extra = n - end_of_image
    if extra > 0:
        v.trailing = extra
        v.trailing_what = trailing_kind(mv[end_of_image:])


def _stored(idat: list[Any]) -> bool:
    """Whether the zlib stream of IDAT starts with a stored (uncompressed) deflate block: its size then
    says nothing of the pixels (a writer at compression level 0 stores a constant image at full size)."""
    head = b"".join(bytes(part[:3]) for part in idat[:3])[:3]
    return len(head) == 3 and head[2] & 0b110 == 0  # BTYPE, bits 1-2 of the first block's header, is 00


def _sequence(body: Any, expected: int, name: str) -> int:
    if len(body) < 4:
        raise PngError(f"APNG: {name} chunk too short")
    seq = int.from_bytes(body[0:4], "big")
    if seq != expected:
        raise PngError(f"APNG: {name} has sequence number {seq}, expected {expected}")
    return expected + 1


def _fctl(body: Any, head: _Header | None) -> _Frame:
    if len(body) < 26 or head is None:
        raise PngError("APNG: malformed fcTL chunk")
    width = int.from_bytes(body[4:8], "big")
    height = int.from_bytes(body[8:12], "big")
    x = int.from_bytes(body[12:16], "big")
    y = int.from_bytes(body[16:20], "big")
    if not width or not height or x + width > head.width or y + height > head.height:
        raise PngError(f"APNG: frame {width}×{height} at ({x}, {y}) outside the {head.width}×{head.height} canvas")
    return _Frame(width, height)


def _check_frames(
    frames: list[_Frame], count: int | None, head: _Header, idat: list[Any], damage: list[str], problems: list[str]
) -> None:
    """Every frame's data; a frame count in acTL that is not the file's is left to the loader (``problems``):
    Pillow refuses one too high, and reads one too low (or out of range) as it says, the default image first."""
    if count is not None and count != len(frames) and 0 < count <= MAX_CHUNK:
        declared = "1 frame" if count == 1 else f"{count:,} frames"
        problems.append(f"APNG: acTL declares {declared}, the file has {len(frames):,}")
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


def _loader_decides(data: Any, v: Verdict, anc: _Ancillary, fallback: Fallback) -> None:
    """Damaged ancillary chunks: an error where Pillow fails on the file, else damage (Pillow's limits alone
    are no damage: a valid file Pillow loads)."""
    second = Verdict(format="png")
    fallback(data, second, constant=False)
    if second.error is not None:
        found = list(dict.fromkeys(anc.problems + anc.limits))  # three text chunks over one limit: said once
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        v.error = f"{'; '.join(found[:3])}{more} (Pillow: {second.error.removeprefix('Pillow ')})"
    else:
        v.damage.extend(anc.problems)


def _size(n: int) -> str:
    return f"{n} byte" if n == 1 else f"{n} bytes"


def _pillow_limits() -> tuple[int, int]:
    """Pillow's limits on one inflated text chunk or ICC profile, and on all text (it raises beyond them);
    read on each use: a program may change them."""
    from PIL import PngImagePlugin

    return int(PngImagePlugin.MAX_TEXT_CHUNK), int(PngImagePlugin.MAX_TEXT_MEMORY)


def exif_tiff(body: memoryview) -> memoryview:
    """The TIFF structure of an eXIf chunk. Some writers put JPEG's APP1 prefix ``Exif\\0\\0`` before it,
    against the PNG spec; Pillow (``getexif``, ``exif_transpose``) skips it, and so do loaders built on it."""
    return body[6:] if bytes(body[:6]) == b"Exif\x00\x00" else body


class _Ancillary:
    """The standard ancillary chunks (and PLTE's place), checked during the chunk walk: what is wrong goes to
    ``problems`` (the spec's rules) or ``limits`` (valid, but beyond what Pillow accepts)."""

    __slots__ = ("colour", "depth", "limits", "palette", "problems", "seen", "text", "xmp_orientation")

    def __init__(self, head: _Header) -> None:
        self.colour = head.colour
        self.depth = head.depth
        self.problems: list[str] = []
        self.limits: list[str] = []
        self.seen: set[bytes] = set()
        self.palette = 0
        """Entries of the PLTE chunk seen so far (0: none yet)."""
        self.text = 0
        """Characters of text Pillow keeps (its MAX_TEXT_MEMORY applies to their sum)."""
        self.xmp_orientation: int | None = None
        """The orientation in a text chunk's XMP packet (``XML:com.adobe.xmp``), if any."""

    def check(self, ctype: bytes, body: memoryview, after_idat: bool) -> None:
        name = ctype.decode("latin-1")
        problems = self.problems
        want = FIXED_LENGTH.get(ctype)
        if want is not None and len(body) != want:
            spec = "APNG" if ctype == b"acTL" else "PNG"
            problems.append(f"{name} chunk is {_size(len(body))} (the {spec} spec says {want})")
        else:
            CHECKS[ctype](self, name, body)
        if ctype in SINGLE:
            if ctype in self.seen:
                problems.append(f"more than one {name} chunk (the PNG spec allows one)")
            self.seen.add(ctype)
        if after_idat and ctype in BEFORE_IDAT:
            problems.append(f"{name} chunk after the image data (the PNG spec puts it before IDAT)")
        elif ctype in BEFORE_PLTE and self.palette:
            problems.append(f"{name} chunk after PLTE (the PNG spec puts it before)")
        elif ctype in AFTER_PLTE and self.colour == 3 and not self.palette:
            problems.append(f"{name} chunk before PLTE (the PNG spec puts it after)")

    def finish(self) -> None:
        """Checks of the whole file, after the walk."""
        if self.text:
            memory = _pillow_limits()[1]
            if self.text > memory:
                self.limits.append(
                    f"text chunks hold {self.text:,} characters, more than Pillow's limit of {memory:,}"
                    " (PngImagePlugin.MAX_TEXT_MEMORY)"
                )

    # -- one method per chunk type; fixed lengths are checked before they are called -------------------

    def _plte(self, name: str, body: memoryview) -> None:
        entries = len(body) // 3  # the length itself is checked as structure
        if self.colour in (0, 4):
            self.problems.append(f"PLTE chunk in a {COLOUR_NAMES[self.colour]} image (the PNG spec forbids it)")
        elif self.colour == 3 and entries > 1 << self.depth:
            self.problems.append(
                f"PLTE chunk has {entries} entries, more than a {self.depth}-bit image can index ({1 << self.depth})"
            )
        if not self.palette:
            self.palette = entries

    def _trns(self, name: str, body: memoryview) -> None:
        colour = self.colour
        if colour in (4, 6):
            self.problems.append(
                f"tRNS chunk in an image with an alpha channel ({COLOUR_NAMES[colour]}): the PNG spec forbids it"
            )
        elif colour == 3:
            if self.palette and len(body) > self.palette:
                self.problems.append(
                    f"tRNS chunk has {len(body)} entries, the palette {self.palette}"
                    " (the PNG spec allows one per palette entry)"
                )
        elif len(body) != TRNS_LENGTH[colour]:
            self.problems.append(
                f"tRNS chunk is {_size(len(body))} (the PNG spec says {TRNS_LENGTH[colour]}"
                f" for {COLOUR_NAMES[colour]} images)"
            )
        elif self.depth < 16:
            top = (1 << self.depth) - 1
            values = tuple(int.from_bytes(body[i : i + 2], "big") for i in range(0, len(body), 2))
            if max(values) > top:
                shown = values[0] if len(values) == 1 else values
                self.problems.append(
                    f"tRNS chunk: transparent {COLOUR_NAMES[colour]} value {shown} outside 0-{top}"
                    f" (the range of {self.depth}-bit samples)"
                )

    def _gama(self, name: str, body: memoryview) -> None:
        if not any(body):
            self.problems.append("gAMA chunk: gamma 0 (the PNG spec forbids zero)")

    def _chrm(self, name: str, body: memoryview) -> None:
        pass  # the length is all there is to check: any chromaticities are valid numbers

    def _srgb(self, name: str, body: memoryview) -> None:
        if body[0] > 3:
            self.problems.append(f"sRGB chunk: rendering intent {body[0]} (the PNG spec defines 0-3)")

    def _phys(self, name: str, body: memoryview) -> None:
        if body[8] > 1:
            self.problems.append(f"pHYs chunk: unit {body[8]} (the PNG spec defines 0 and 1)")

    def _time(self, name: str, body: memoryview) -> None:
        month, day, hour, minute, second = body[2:7]
        if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 60):
            year = int.from_bytes(body[0:2], "big")
            self.problems.append(
                f"tIME chunk: invalid time {year}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}"
            )

    def _sbit(self, name: str, body: memoryview) -> None:
        want = SBIT_LENGTH[self.colour]
        if len(body) != want:
            self.problems.append(
                f"sBIT chunk is {_size(len(body))} (the PNG spec says {want} for {COLOUR_NAMES[self.colour]} images)"
            )
            return
        top = 8 if self.colour == 3 else self.depth
        if not all(0 < b <= top for b in body):
            self.problems.append(f"sBIT chunk: significant bits {tuple(body)} outside 1-{top}")

    def _bkgd(self, name: str, body: memoryview) -> None:
        want = BKGD_LENGTH[self.colour]
        if len(body) != want:
            self.problems.append(
                f"bKGD chunk is {_size(len(body))} (the PNG spec says {want} for {COLOUR_NAMES[self.colour]} images)"
            )
        elif self.colour == 3 and self.palette and body[0] >= self.palette:
            self.problems.append(f"bKGD chunk: palette index {body[0]} beyond the {self.palette}-entry palette")

    def _hist(self, name: str, body: memoryview) -> None:
        if not self.palette:
            self.problems.append("hIST chunk without a PLTE chunk before it")
        elif len(body) != 2 * self.palette:
            self.problems.append(
                f"hIST chunk is {_size(len(body))} (the PNG spec says {2 * self.palette}"
                f" for the {self.palette}-entry palette)"
            )

    def _exif(self, name: str, body: memoryview) -> None:
        body = exif_tiff(body)
        if not body:
            self.problems.append("eXIf chunk is empty")
        elif bytes(body[:4]) not in TIFF_HEADERS:
            self.problems.append(
                "eXIf chunk does not start with a TIFF header (II*\\0 or MM\\0*): Pillow's getexif() and"
                " ImageOps.exif_transpose() raise on it"
            )
        elif len(body) < 8:
            self.problems.append(
                f"eXIf chunk is {_size(len(body))}, shorter than a TIFF header (8): Pillow's getexif() and"
                " ImageOps.exif_transpose() raise on it"
            )

    def _actl(self, name: str, body: memoryview) -> None:
        frames = int.from_bytes(body[0:4], "big")
        if not 0 < frames <= MAX_CHUNK:
            self.problems.append(f"acTL chunk declares {frames:,} frames (the APNG spec says 1 to 2^31-1)")

    def _fctl(self, name: str, body: memoryview) -> None:
        if len(body) < 26:
            return  # a structural error (_fctl raises on it)
        if len(body) > 26:
            self.problems.append(f"fcTL chunk is {_size(len(body))} (the APNG spec says 26)")
        if body[24] > 2:
            self.problems.append(f"fcTL chunk: dispose operation {body[24]} (the APNG spec defines 0-2)")
        if body[25] > 1:
            self.problems.append(f"fcTL chunk: blend operation {body[25]} (the APNG spec defines 0 and 1)")

    # -- chunks that start with a keyword ---------------------------------------------------------------

    def _keyword(self, name: str, body: memoryview, what: str = "keyword") -> int:
        """Offset after the keyword's null separator (-1 when there is none); the keyword's problems noted."""
        if not body:
            self.problems.append(f"{name} chunk is empty")
            return -1
        start = bytes(body[:80])
        end = start.find(b"\0")
        if end < 0:
            state = f"a {what} longer than 79 bytes" if len(body) >= 80 else f"no null separator after the {what}"
            self.problems.append(f"{name} chunk: {state}")
            return -1
        word = start[:end]
        if not word:
            self.problems.append(f"{name} chunk: empty {what}")
        elif word[0] == 32 or word[-1] == 32 or b"  " in word or word.translate(None, KEYWORD_CHARS):
            self.problems.append(
                f"{name} chunk: {what} {word.decode('latin-1')!r} has characters or spaces the PNG spec forbids"
            )
        return end + 1

    def _method(self, name: str, body: memoryview, pos: int) -> bool:
        """The compression method byte at ``pos`` is there and 0."""
        if pos >= len(body):
            self.problems.append(f"{name} chunk ends before its compression method")
            return False
        if body[pos]:
            self.problems.append(f"{name} chunk: unknown compression method {body[pos]} (the PNG spec defines only 0)")
            return False
        return True

    def _inflate(self, name: str, stream: memoryview) -> bytes | None:
        """The inflated text or profile; None (and a problem or a limit noted) where it is damaged or too large."""
        limit = _pillow_limits()[0]
        d = zlib.decompressobj()  # Python's zlib, as Pillow's: the same output at its limit
        try:
            out = d.decompress(stream, limit)
        except zlib.error as exc:
            self.problems.append(f"{name} chunk: invalid compressed data ({exc})")
            return None
        if d.unconsumed_tail or (len(out) >= limit and not d.eof):
            self.limits.append(
                f"{name} chunk inflates to more than {limit:,} bytes, Pillow's limit (PngImagePlugin.MAX_TEXT_CHUNK)"
            )
            return None
        if not d.eof:
            self.problems.append(f"{name} chunk: the compressed data is truncated")
        elif d.unused_data:
            self.problems.append(f"{name} chunk: {_size(len(d.unused_data))} after the end of the compressed data")
        return bytes(out)

    def _iccp(self, name: str, body: memoryview) -> None:
        pos = self._keyword(name, body, "profile name")
        if pos >= 0 and self._method(name, body, pos):
            self._inflate(name, body[pos + 1 :])

    def _text(self, name: str, body: memoryview) -> None:
        pos = self._keyword(name, body)
        if pos < 0:
            return
        if bytes(body[pos:]).find(b"\0") >= 0:
            self.problems.append("tEXt chunk: a null byte in the text (the PNG spec forbids it)")
        self.text += len(body) - pos
        self._xmp(body, pos, bytes(body[pos:]))

    def _beyond_text_memory(self) -> bool:
        """Whether the text so far is past Pillow's limit on all text (the file is refused at ``finish``): the
        chunks after it are not inflated (2,000 text chunks of a zlib bomb each took seconds a file)."""
        return self.text > _pillow_limits()[1]

    def _ztxt(self, name: str, body: memoryview) -> None:
        if self._beyond_text_memory():
            return
        pos = self._keyword(name, body)
        if pos >= 0 and self._method(name, body, pos):
            out = self._inflate(name, body[pos + 1 :])
            self.text += len(out) if out is not None else 0
            if out is not None:
                self._xmp(body, pos, out)

    def _itxt(self, name: str, body: memoryview) -> None:
        if self._beyond_text_memory():
            return
        pos = self._keyword(name, body)
        if pos < 0:
            return
        if pos + 2 > len(body):
            self.problems.append("iTXt chunk ends before its compression flag and method")
            return
        flag = body[pos]
        if flag > 1:
            self.problems.append(f"iTXt chunk: compression flag {flag} (the PNG spec defines 0 and 1)")
            return
        if flag and not self._method(name, body, pos + 1):
            return
        rest = bytes(body[pos + 2 :])
        language = rest.find(b"\0")
        translated = rest.find(b"\0", language + 1) if language >= 0 else -1
        if translated < 0:
            self.problems.append("iTXt chunk: no null separators after the language tag and the translated keyword")
            return
        text = rest[translated + 1 :]
        if flag:
            inflated = self._inflate(name, memoryview(text))
            if inflated is None:
                return
            text = inflated
        try:
            rest[language + 1 : translated].decode("utf-8")
            text.decode("utf-8")
        except UnicodeDecodeError:
            self.problems.append("iTXt chunk: the translated keyword or the text is not valid UTF-8")
            return
        self.text += len(text)
        self._xmp(body, pos, text)

    def _xmp(self, body: memoryview, pos: int, text: bytes) -> None:
        """Note the orientation of an XMP packet, the text of a chunk whose keyword (before ``pos``) says so."""
        if bytes(body[: pos - 1]) == XMP_KEYWORD:
            found = xmp_orientation(text)
            self.xmp_orientation = found if found is not None else self.xmp_orientation

    def _splt(self, name: str, body: memoryview) -> None:
        pos = self._keyword(name, body, "palette name")
        if pos < 0:
            return
        if pos >= len(body):
            self.problems.append("sPLT chunk ends after the palette name")
            return
        depth = body[pos]
        if depth not in (8, 16):
            self.problems.append(f"sPLT chunk: sample depth {depth} (the PNG spec says 8 or 16)")
        elif (len(body) - pos - 1) % (6 if depth == 8 else 10):
            self.problems.append(
                f"sPLT chunk: {_size(len(body) - pos - 1)} of entries, not a multiple of {6 if depth == 8 else 10}"
            )


CHECKS: dict[bytes, Callable[[_Ancillary, str, memoryview], None]] = {
    b"PLTE": _Ancillary._plte,
    b"tRNS": _Ancillary._trns,
    b"gAMA": _Ancillary._gama,
    b"cHRM": _Ancillary._chrm,
    b"sRGB": _Ancillary._srgb,
    b"iCCP": _Ancillary._iccp,
    b"sBIT": _Ancillary._sbit,
    b"bKGD": _Ancillary._bkgd,
    b"hIST": _Ancillary._hist,
    b"pHYs": _Ancillary._phys,
    b"sPLT": _Ancillary._splt,
    b"tIME": _Ancillary._time,
    b"tEXt": _Ancillary._text,
    b"zTXt": _Ancillary._ztxt,
    b"iTXt": _Ancillary._itxt,
    b"eXIf": _Ancillary._exif,
    b"acTL": _Ancillary._actl,
    b"fcTL": _Ancillary._fctl,
}
"""The chunks checked, and how (``_Ancillary.check`` adds the count and order rules)."""
