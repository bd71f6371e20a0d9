"""JPEG: strict libjpeg-turbo decoding (simplejpeg) with DCT scaling, plus a marker walk for what it skips.

Why this and not Pillow: Pillow's ``verify()`` decodes no JPEG data at all, and its ``load()`` lets libjpeg
repair damaged data silently ("Corrupt JPEG data: N extraneous bytes", a zeroed block). libjpeg-turbo in
strict mode turns those warnings into errors, and decoding at 1/8 scale (``min_height``/``min_width``)
still runs the whole entropy decoder, so it reaches the same verdict as a full decode, faster.

The verdict, per file:

- ``bomb``: the frame header declares more pixels than allowed; nothing is decoded.
- strict decode passes: the image is valid. A 1/8 thumbnail that is constant is confirmed by a full decode.
- strict decode fails, the non-strict decode succeeds: a few known warnings are harmless (unknown JFIF
  revision ...). Otherwise the data is damaged, and what a loader does decides the severity: ``error``
  when Pillow fails on the file (no end-of-image marker: "image file is truncated"; a stray marker:
  "broken data stream"), ``damage`` when Pillow silently decodes garbage ("Corrupt JPEG data: N
  extraneous bytes ...").
- strict and non-strict decodes fail: Pillow gets the last word (the TurboJPEG API refuses some valid
  layouts, e.g. unusual chroma subsampling); if Pillow fails too, ``error`` with the decoder's reason.

The marker walk reads the header (size, components, EXIF orientation, MPF) and finds the first
end-of-image marker after the scans, to measure trailing data (concatenated files, hidden payloads).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simplejpeg

from .exif import XMP_HEADER, xmp_orientation
from .exif import orientation as exif_orientation
from .sniff import trailing_kind
from .verdict import Verdict

SOF_MARKERS = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})
NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
"""A marker inside entropy-coded data: 0xFF followed by neither a stuffed zero, a restart marker nor fill."""

END_MARKER = re.compile(rb"\xff\xd9")
"""The end-of-image marker."""

HARMLESS = (
    "Warning: unknown JFIF revision number",
    "Invalid SOS parameters for sequential JPEG",
    "Unknown Adobe color transform code",
    "Application transferred too many scanlines",
)
"""libjpeg warnings about valid-enough files: the image decodes as meant. Strict mode stops at the first
warning, so the header field behind one is set to what libjpeg assumes and the copy decoded again: damage
further on must still be found."""

WARNINGS = ("Corrupt JPEG data", "Premature end of JPEG file", "Inconsistent progression sequence")
"""libjpeg's warnings about damaged data (JWRN_*): a decoder that goes on past one returns wrong pixels."""

REFUSED = ("Unsupported color conversion request", "Unsupported JPEG data precision")
"""libjpeg messages that refuse a file libjpeg could not be asked about (not damage): Pillow judges it. The
8-bit interface refuses 12- and 16-bit samples (medical and scientific images), which libjpeg-turbo 3's own
12- and 16-bit interfaces decode: Pillow cannot, so a Pillow-based loader fails on them."""

LOSSLESS = frozenset({0xC3, 0xC7, 0xCB, 0xCF})
"""Lossless frame types (SOF3 ...: DNG, medical images): there is no DCT to scale, and libjpeg-turbo's TurboJPEG
interface, asked for a 1/8 image, writes the full-size image into the buffer it allocated for the small one (a
heap overflow: the process crashes then or later). They are decoded at full size, and in their own colour
space: libjpeg-turbo converts no colours in a lossless frame (a gray decode of an RGB one is "Unsupported color
conversion request", which would leave the judgement to Pillow, and Pillow reports no damage)."""

LOSSLESS_SPACES = {3: "RGB", 4: "CMYK"}
"""The colour space a lossless frame of so many components is decoded to (others: gray)."""

SEQUENTIAL = frozenset({0xC0, 0xC1, 0xC5, 0xC9, 0xCD})
"""Frame types whose scans must read Ss=0, Se=63, Ah=Al=0 (libjpeg warns and ignores other values)."""


@dataclass(slots=True)
class JpegHeader:
    width: int = 0
    height: int = 0
    components: int = 0
    precision: int = 8
    sof: int = 0
    scan: int = 0
    """Offset of the first scan's entropy-coded data (0: no scan found)."""
    orientation: int | None = None
    exif: bool = False
    """Whether an EXIF segment was met: the first one holds the orientation, as Pillow's getexif() reads it."""
    xmp_orientation: int | None = None
    """The orientation of the last XMP segment (Pillow keeps the last), taken where EXIF gives none."""
    mpf: bool = False
    pictures: list[int] | None = None
    """Where an MPO file's pictures after the first start, from its MP index (offsets in the file)."""
    jfif_versions: list[int] = field(default_factory=list)
    """Offsets of the JFIF segments' major version bytes."""
    adobe_transform: int = -1
    """Offset of the Adobe segment's colour transform byte (-1: none)."""
    sos: int = -1
    """Offset of the first scan header's body (its component count)."""
    problem: str | None = None
    """What is wrong with the header's structure, when something is (used when the decoders fail)."""
    tables: list[tuple[int, int]] = field(default_factory=list)
    """Where the Huffman table (DHT) segments are: checked only when the decoders fail (``header_problem``)."""


def _u16(data: Any, pos: int) -> int:
    return int((data[pos] << 8) | data[pos + 1])


def _check_dht(seg: Any) -> str | None:
    pos = 0
    while pos < len(seg):
        tc_th = seg[pos]
        if tc_th >> 4 > 1 or tc_th & 15 > 3:
            return f"DHT segment: bad table class/id 0x{tc_th:02x}"
        if pos + 17 > len(seg):
            return "DHT segment: truncated table"
        total = sum(seg[pos + 1 : pos + 17])
        if total > 256:
            return f"DHT segment: {total} codes (at most 256)"
        pos += 17 + total
    return "DHT segment: length does not match its tables" if pos != len(seg) else None


def header_problem(data: Any, head: JpegHeader) -> str | None:
    """What is wrong with the header: its structure, else its Huffman tables."""
    if head.problem is not None:
        return head.problem
    for start, end in head.tables:
        problem = _check_dht(data[start:end])
        if problem is not None:
            return problem
    return None


def parse_header(data: Any) -> JpegHeader:
    """Walk the markers from SOI to the first SOS. Never raises; problems go to ``problem``."""
    head = JpegHeader()
    n = len(data)
    if n < 2 or data[0] != 0xFF or data[1] != 0xD8:
        head.problem = "no start-of-image marker"
        return head
    pos = 2
    while True:
        while pos < n and data[pos] != 0xFF:  # libjpeg skips such bytes with a warning
            pos += 1
        while pos < n and data[pos] == 0xFF:
            pos += 1
        if pos >= n:
            head.problem = "the file ends inside the header (no image data: truncated)"
            return head
        marker = data[pos]
        pos += 1
        if marker in STANDALONE or marker == 0xD8:
            continue
        if marker == 0xD9:
            head.problem = "end-of-image marker before any image data"
            return head
        if pos + 2 > n:
            head.problem = "the file ends inside the header (truncated)"
            return head
        length = _u16(data, pos)
        if length < 2:
            head.problem = f"marker 0x{marker:02x} has an invalid length {length}"
            return head
        if pos + length > n:
            head.problem = f"the file ends inside marker segment 0x{marker:02x} (truncated)"
            return head
        seg = data[pos + 2 : pos + length]
        if marker in SOF_MARKERS:
            if len(seg) < 6:
                head.problem = "frame header (SOF) too short"
                return head
            head.sof = marker
            head.precision = seg[0]
            head.height = _u16(seg, 1)
            head.width = _u16(seg, 3)
            head.components = seg[5]
            if head.width == 0 or head.height == 0:
                head.problem = f"frame header declares a {head.width}×{head.height} image"
            elif len(seg) < 6 + 3 * head.components or head.components == 0:
                head.problem = "frame header (SOF) too short for its components"
        elif marker == 0xC4:
            head.tables.append((pos + 2, pos + length))
        elif marker == 0xE0 and bytes(seg[:5]) == b"JFIF\x00" and len(seg) >= 7:
            head.jfif_versions.append(pos + 2 + 5)
        elif marker == 0xEE and bytes(seg[:5]) == b"Adobe" and len(seg) >= 12:
            head.adobe_transform = pos + 2 + 11
        elif marker == 0xE1 and bytes(seg[:6]) == b"Exif\x00\x00" and not head.exif:
            head.exif = True
            head.orientation = exif_orientation(seg[6:])
        elif marker == 0xE1 and bytes(seg[: len(XMP_HEADER)]) == XMP_HEADER:
            head.xmp_orientation = xmp_orientation(bytes(seg[len(XMP_HEADER) :]))
        elif marker == 0xE2 and bytes(seg[:4]) == b"MPF\x00":
            head.mpf = True
            head.pictures = _mp_index(bytes(seg[4:]), pos + 2 + 4)
        elif marker == 0xDA:
            if not head.sof:
                head.problem = head.problem or "scan (SOS) before any frame header (SOF)"
            head.scan = pos + length
            head.sos = pos + 2
            return head
        pos += length


def end_of_image(data: Any, scan: int) -> int:
    """Offset just past the first end-of-image marker after the scans start; -1 when there is none."""
    n = len(data)
    first = END_MARKER.search(data, scan)
    if first is not None and first.start() == n - 2:
        # The usual file: the first FF D9 after the scans is its last two bytes. Valid entropy-coded data
        # holds no FF D9 (an FF there is followed by 00 or a restart marker), so that is where the walk below
        # would stop too; it costs one search for a literal instead of a marker search through the whole image.
        # (A regular expression: a one-process scan of the benchmark's 2,300 files ran 0-2.6% faster with it
        # than with a vectorised numpy search of the byte pairs, the faster of the two in a loop of searches
        # alone; bytes.find is slower than both, as every 0xFF stops its fast skip.)
        return n
    pos = scan
    while True:
        m = NEXT_MARKER.search(data, pos)
        if m is None:
            return -1
        i = m.start()
        marker = data[i + 1]
        if marker == 0xD9:
            return i + 2
        if marker in (0xC4, 0xDB, 0xDD, 0xDA, 0xCC, 0xDC, 0xFE) or 0xE0 <= marker <= 0xEF:
            if i + 4 > n:
                return -1
            pos = i + 2 + _u16(data, i + 2)
        else:
            pos = i + 2


def decode_thumbnail(data: Any) -> np.ndarray[Any, Any]:
    """The strict 1/8 gray decode of one JPEG stream (full size when lossless); raises ValueError with
    libjpeg's reason."""
    return _judging_decode(data, parse_header(data), strict=True)


def _judging_decode(data: Any, head: JpegHeader, strict: bool) -> np.ndarray[Any, Any]:
    """The decode that judges ``data``: 1/8 gray, or a lossless frame at full size in its colour space."""
    if head.sof in LOSSLESS:
        return _decode(data, strict, LOSSLESS_SPACES.get(head.components, "GRAY"), full=True)
    return _decode(data, strict)


def _decode(data: Any, strict: bool, colorspace: str = "GRAY", full: bool = False) -> np.ndarray[Any, Any]:
    """``full``: at full size; never scale a lossless frame (see ``LOSSLESS``)."""
    if full:
        return simplejpeg.decode_jpeg(data, colorspace=colorspace, strict=strict)  # type: ignore[no-any-return]
    return simplejpeg.decode_jpeg(  # type: ignore[no-any-return]
        data, colorspace=colorspace, strict=strict, min_height=1, min_width=1
    )


def _constant(data: Any, components: int) -> str | None:
    """Confirm a constant thumbnail with a full-size decode; the single value as text, or None."""
    space = "GRAY" if components == 1 else ("CMYK" if components == 4 else "RGB")
    try:
        full = _decode(data, False, space, full=True)
    except ValueError:
        return None
    flat = full.reshape(-1, full.shape[-1])
    first = flat[0]
    if not bool((flat == first).all()):
        return None
    values = [int(x) for x in first]
    return str(values[0]) if len(values) == 1 else str(tuple(values))


def _uniform(decoded: np.ndarray[Any, Any]) -> bool:
    """Every pixel of a judging decode the same: a 1/8 gray thumbnail (1/64 of the image, one byte a pixel:
    counting one byte value is the cheapest test), or a lossless frame in its colour space."""
    pixels = decoded.tobytes()
    step = decoded.shape[-1] if decoded.ndim == 3 else 1
    if step == 1:
        return pixels.count(pixels[:1]) == len(pixels)
    return pixels == pixels[:step] * (len(pixels) // step)


def _mode(head: JpegHeader) -> str:
    return {1: "L", 3: "RGB", 4: "CMYK"}.get(head.components, f"{head.components}-component")


def inspect_jpeg(data: Any, verdict: Verdict, max_pixels: int, pillow_fallback: Any) -> None:
    """Fill ``verdict`` for JPEG bytes. ``pillow_fallback(data, verdict)`` judges what libjpeg-turbo's
    TurboJPEG interface refuses."""
    head = parse_header(data)
    verdict.orientation = head.orientation
    if head.orientation is None and head.xmp_orientation is not None:
        verdict.orientation, verdict.orientation_xmp = head.xmp_orientation, True
    verdict.width, verdict.height = head.width, head.height
    if head.width and head.height and head.width * head.height > max_pixels:
        pixels = head.width * head.height
        verdict.bomb = f"{head.width}×{head.height} = {pixels:,} pixels declared (limit {max_pixels:,})"
        return
    verdict.mode = _mode(head)
    verdict.judge = "jpeg"
    try:
        thumb, decoded = _strict_decode(data, head)
    except ValueError as exc:
        reason, decoded = exc.args
        _strict_failed(data, decoded, head, reason, verdict, pillow_fallback)
        if not verdict.usable:
            return
    else:
        if _uniform(thumb):
            verdict.constant = _constant(decoded, head.components)
    if head.precision != 8:
        verdict.unusual = f"{head.precision}-bit JPEG samples"
    elif head.components == 4:
        verdict.unusual = "CMYK JPEG (4 channels; loaders expecting RGB get wrong colours or 4 channels)"
    _trailing(data, head, verdict, max_pixels, pillow_fallback)


def _strict_decode(data: Any, head: JpegHeader) -> tuple[np.ndarray[Any, Any], Any]:
    """The strict 1/8 decode of ``data``, past the warnings about valid-enough files: (thumbnail, the bytes
    decoded). Raises ValueError(libjpeg's reason, the bytes decoded) when it fails."""
    decoded = data
    while True:  # ends: each field is set once, and a warning with nothing left to set is raised
        try:
            return _judging_decode(decoded, head, strict=True), decoded
        except ValueError as exc:
            reason = str(exc)
            fixed = _assumed(decoded, head, reason) if reason.startswith(HARMLESS) else None
            if fixed is None:
                raise ValueError(reason, decoded) from exc
            decoded = fixed


def _assumed(data: Any, head: JpegHeader, reason: str) -> bytes | None:
    """A copy of ``data`` with the header field a harmless warning is about set to what libjpeg assumes in
    its place; None when there is no such field to set (or it is set already)."""
    out = bytearray(data)
    if reason.startswith("Warning: unknown JFIF revision") and head.jfif_versions:
        for at in head.jfif_versions:
            out[at] = 1
    elif reason.startswith("Invalid SOS parameters") and head.sos >= 0 and head.sof in SEQUENTIAL:
        for sos in (head.sos, *_later_scans(data, head.scan)):
            at = sos + 1 + 2 * out[sos]
            if at + 3 <= len(out):
                out[at : at + 3] = b"\x00\x3f\x00"  # Ss, Se, Ah/Al of a sequential scan
    elif reason.startswith("Unknown Adobe color transform") and head.adobe_transform >= 0:
        out[head.adobe_transform] = 2 if head.components == 4 else 1  # libjpeg assumes YCCK or YCbCr
    else:
        return None
    return None if out == data else bytes(out)


def _later_scans(data: Any, scan: int) -> list[int]:
    """Offsets of the scan headers' bodies after the first scan (a sequential JPEG may hold one scan per
    component), up to the end-of-image marker."""
    found: list[int] = []
    pos, n = scan, len(data)
    while True:
        m = NEXT_MARKER.search(data, pos)
        if m is None or m.start() + 4 > n:
            return found
        i = m.start()
        marker = data[i + 1]
        if marker == 0xD9:
            return found
        if marker == 0xDA:
            found.append(i + 4)
        pos = i + 2 + (0 if marker in STANDALONE or marker == 0xD8 else _u16(data, i + 2))


def _mp_index(tiff: bytes, base: int) -> list[int] | None:
    """Where the pictures after the first start, from an MPO file's MP index (CIPA DC-007): offsets in the
    index count from ``base``, where its TIFF header starts. None when the index is unreadable. (The sizes
    in the index are not used: Pillow writes wrong ones from the third picture on.)"""
    if len(tiff) < 8 or tiff[:2] not in (b"II", b"MM"):
        return None
    endian = "<" if tiff[:2] == b"II" else ">"
    try:
        (ifd,) = struct.unpack_from(endian + "I", tiff, 4)
        (count,) = struct.unpack_from(endian + "H", tiff, ifd)
        for k in range(count):
            tag, _typ, n, value = struct.unpack_from(endian + "HHII", tiff, ifd + 2 + 12 * k)
            if tag == 0xB002 and n % 16 == 0 and n:  # MPEntry: 16 bytes per picture
                entries = [struct.unpack_from(endian + "IIIHH", tiff, value + 16 * j) for j in range(n // 16)]
                return sorted(base + offset for _attr, _size, offset, _a, _b in entries[1:])
    except struct.error:
        return None
    return None


def _strict_failed(
    data: Any, decoded: Any, head: JpegHeader, reason: str, verdict: Verdict, pillow_fallback: Any
) -> None:
    """``decoded``: ``data`` with the fields of harmless warnings set (``_strict_decode``)."""
    try:
        _judging_decode(decoded, head, strict=False)
    except ValueError as exc:
        fatal = str(exc)
    else:
        if head.scan and end_of_image(data, head.scan) < 0 and END_MARKER.search(data, head.scan) is None:
            verdict.error = f"truncated: no end-of-image marker (libjpeg: {reason})"
            return
        if reason.startswith(HARMLESS):
            return
        # Damage libjpeg can step over. Whether it is fatal is what the loader does: Pillow decides.
        second = Verdict(format="jpeg")
        pillow_fallback(data, second, constant=False)
        if second.error is not None:
            verdict.error = f"{reason} (Pillow: {second.error})"
        else:
            verdict.damage.append(reason)
        return
    # libjpeg-turbo refused the file: Pillow (libjpeg's own interface) gets the last word.
    pillow_fallback(data, verdict)
    if verdict.error is None:
        if fatal.startswith(WARNINGS):
            # A warning about the header ("N extraneous bytes before marker 0xc4": a table skipped) stops the
            # TurboJPEG interface even when not strict; Pillow decodes on, with what the skipped part held lost.
            verdict.damage.append(fatal)
        return
    problem = header_problem(data, head)
    if "tjDecompressHeader" in fatal or fatal.startswith(("tj", *REFUSED)):
        # libjpeg-turbo's interface refused the file rather than judged it: the reason is the header walk's,
        # else Pillow's, credited to Pillow
        if problem is None:
            return
        fatal = problem
    elif problem and problem not in fatal:
        fatal = f"{fatal} ({problem})"
    elif fatal.startswith(WARNINGS):  # damage libjpeg steps over, where Pillow fails: say so, as above
        fatal = f"{fatal} (Pillow: {verdict.error.removeprefix('Pillow ')})"
    verdict.error = fatal
    verdict.judge = "jpeg"


def _trailing(data: Any, head: JpegHeader, verdict: Verdict, max_pixels: int, pillow_fallback: Any) -> None:
    if not head.scan:
        return
    end = end_of_image(data, head.scan)
    if end < 0:
        if verdict.error is None and not verdict.damage:
            verdict.damage.append("no end-of-image marker (truncated after the image data?)")
        return
    if head.mpf:  # a multi-picture (MPO) file: the other pictures follow the first one by design
        if head.pictures is not None:
            end = _indexed_pictures(data, head.pictures, end, verdict, max_pixels, pillow_fallback)
        else:
            end = _other_pictures(data, end, verdict)
        if end < 0:
            return
    extra = len(data) - end
    if extra <= 0:
        return
    verdict.trailing = extra
    verdict.trailing_what = trailing_kind(data[end:])


def _indexed_pictures(
    data: Any, starts: list[int], end: int, verdict: Verdict, max_pixels: int, pillow_fallback: Any
) -> int:
    """Judge each picture an MPO file's MP index places after the first as a JPEG of its own (every frame of
    a multi-frame file is checked); the offset after the last one's end-of-image marker (-1 when one is
    missing or broken). A picture runs to the next one's start."""
    for number, start in enumerate(starts, 2):
        if start < end or bytes(data[start : start + 3]) != b"\xff\xd8\xff":
            # a wrong index (Pillow writes wrong offsets from the fourth picture on): what follows is walked
            where = "beyond the end of the file" if start >= len(data) else "where no picture starts"
            verdict.damage.append(f"the MP index places picture {number} at byte {start:,}, {where}")
            return _other_pictures(data, end, verdict, number - 1)
        stop = min(starts[number - 1], len(data)) if number - 1 < len(starts) else len(data)
        picture = Verdict(format="jpeg")
        inspect_jpeg(data[start:stop], picture, max_pixels, pillow_fallback)
        if picture.error is not None:
            verdict.error = verdict.error or f"picture {number} of the MPO file: {picture.error}"
            return -1
        verdict.damage.extend(f"picture {number} of the MPO file: {d}" for d in picture.damage)
        if picture.bomb is not None:
            verdict.bomb = verdict.bomb or f"picture {number} of the MPO file: {picture.bomb}"
        end = stop - picture.trailing
    return end


def _other_pictures(data: Any, end: int, verdict: Verdict, picture: int = 1) -> int:
    """Check the pictures of an MPO file that follow one another from ``end`` on (without a usable MP index),
    as every frame of a multi-frame file is checked; the offset after the last one (-1 when one is cut short
    or broken). ``picture``: the number of the picture that ends at ``end``."""
    view = memoryview(data)  # (the rest of the file as a view: a copy per picture made many pictures quadratic)
    while bytes(data[end : end + 3]) == b"\xff\xd8\xff":
        picture += 1
        part = view[end:]
        head = parse_header(part)
        after = end_of_image(part, head.scan) if head.scan else -1
        if after < 0:
            verdict.error = verdict.error or f"picture {picture} of the MPO file is truncated (no end-of-image marker)"
            return -1
        try:
            _strict_decode(bytes(part[:after]), head)
        except ValueError as exc:
            reason = exc.args[0]
            try:
                _judging_decode(exc.args[1], head, strict=False)
            except ValueError as fatal:
                verdict.error = verdict.error or f"picture {picture} of the MPO file: {fatal}"
                return -1
            verdict.damage.append(f"picture {picture} of the MPO file: {reason}")
        end += after
    return end
