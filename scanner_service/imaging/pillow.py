"""Pillow as the judge of every format without a dedicated check, and as the second opinion for JPEG.

Every frame of a multi-frame file (GIF, APNG read by Pillow, TIFF pages, WebP animations) is decoded, each
frame's declared size checked against the pixel limit before it is decoded. Warnings Pillow raises while
decoding (truncated reads, corrupt metadata) are kept as damage, and so are libtiff's messages on a damaged
strip, which it prints to standard error while Pillow decodes on (see ``tiff_log``). Pillow's own
decompression-bomb limit is lifted for the duration of a call: the scan applies its own limit from the header
instead.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from PIL import Image, UnidentifiedImageError

from . import tiff_log
from .bmp import bmp_layout
from .containers import NO_TRAILER, gif_end, riff_end
from .ico import ico_damage
from .palette import decoded_beyond
from .sniff import FORMAT_BY_PILLOW, PILLOW_FORMAT, trailing_kind
from .tiff_log import TiffLog
from .tiff_strips import deflate_damage, packbits_damage
from .verdict import PAGES_NAMED, Verdict

if TYPE_CHECKING:
    import numpy as np

UNUSUAL_MODES = {
    "CMYK": "CMYK (4 channels; loaders expecting RGB get wrong colours or 4 channels)",
    "LA": "LA: grayscale with alpha (2 channels)",
    "La": "LA: grayscale with alpha (2 channels)",
    "PA": "PA: palette with alpha",
    "I": "I: integer pixels wider than 8 bits (16-bit PGM or TIFF, 32-bit integers; uint8 pipelines clip them)",
    "I;16": "16-bit grayscale (uint8 pipelines clip or rescale it)",
    "I;16B": "16-bit grayscale (uint8 pipelines clip or rescale it)",
    "I;16L": "16-bit grayscale (uint8 pipelines clip or rescale it)",
    "I;16N": "16-bit grayscale (uint8 pipelines clip or rescale it)",
    "F": "F: 32-bit float pixels (may hold NaN or Inf; ToTensor does not rescale them)",
    "YCbCr": "YCbCr pixels (not RGB)",
    "LAB": "LAB pixels (not RGB)",
    "HSV": "HSV pixels (not RGB)",
}
ORIENTATION_TAG = 0x0112
PALETTE_CHECKED = frozenset({"bmp", "gif"})
"""Formats whose palette may hold fewer entries than their indices reach, and whose reader in Pillow keeps
the palette at the entries the file holds (a PNG's is checked by the PNG structure check)."""

logging.getLogger("PIL").addHandler(logging.NullHandler())
"""Pillow logs what it refuses in a file ("More samples per pixel than can be decoded: 43779", at level
ERROR) before it raises: with no handler configured, Python's last-resort handler printed each line to
standard error, in the middle of the report, once per attempt to open the file. The reason is in the
exception, which is the verdict; a program that configures logging still gets the records."""


@contextmanager
def _own_limits(max_pixels: int | None = None) -> Iterator[None]:
    """Pillow's bomb check at dscan's limit (``max_pixels``; off when None). The declared size of the file is
    checked before decoding; this catches the images nested inside another (an ICNS or ICO icon holds PNG or
    JPEG 2000 images that Pillow opens on its own): Pillow raises DecompressionBombError above twice its
    ``MAX_IMAGE_PIXELS``."""
    saved = Image.MAX_IMAGE_PIXELS
    # rounded up: Pillow raises above twice its limit, and an image of exactly ``max_pixels`` is no bomb
    Image.MAX_IMAGE_PIXELS = None if max_pixels is None else max(1, (max_pixels + 1) // 2)
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def _bomb_text(exc: Image.DecompressionBombError, max_pixels: int) -> str:
    """The finding's detail for Pillow's bomb error: the pixel count declared (the file's own header, or the
    header of an image inside it, as an icon's), against dscan's limit."""
    found = re.search(r"Image size \((\d+) pixels\)", str(exc))
    if found is None:
        return str(exc)
    return f"{int(found.group(1)):,} pixels declared (limit {max_pixels:,})"


def _reason(exc: BaseException, data: Any, fmt: str | None) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, UnidentifiedImageError):
        return _unidentified(data, fmt)
    return text


def _unidentified(data: Any, fmt: str | None) -> str:
    """Why Pillow identifies no image in content whose signature is ``fmt``'s: a TIFF cut short before its
    first image directory (libtiff writes it after the pixels), else what Pillow's reader of that format
    said when it gave up (Pillow keeps it to itself unless asked)."""
    if fmt == "tiff":
        cut = _tiff_cut(data)
        if cut is not None:
            return cut
    name = PILLOW_FORMAT.get(fmt or "")
    said = ""
    if name is not None:
        saved = getattr(Image, "WARN_POSSIBLE_FORMATS", False)  # (Pillow 10.3 and later)
        Image.WARN_POSSIBLE_FORMATS = True
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with contextlib.suppress(Exception):
                    Image.open(io.BytesIO(data), formats=[name]).close()
        finally:
            Image.WARN_POSSIBLE_FORMATS = saved
        prefix = f"{name} opening failed. "
        said = next((str(w.message)[len(prefix) :] for w in caught if str(w.message).startswith(prefix)), "")
    return (
        f"Pillow cannot identify the image ({name}: {said.strip()})"
        if said.strip()
        else "Pillow cannot identify the image"
    )


def _tiff_cut(data: Any) -> str | None:
    """'truncated: ...' when a TIFF's first image directory lies beyond the end of the file, else None."""
    head = bytes(data[:16])
    order: Literal["little", "big"] = "little" if head[:2] == b"II" else "big"
    big = int.from_bytes(head[2:4], order) == 43  # BigTIFF: an 8-byte offset at byte 8
    offset = int.from_bytes(head[8:16] if big else head[4:8], order)
    if offset + 2 <= len(data):
        return None
    return (
        f"truncated: the TIFF's first image directory is at byte {offset:,}, beyond the end of the file "
        f"({len(data):,} bytes)"
    )


def _value_text(lo: Any) -> str:
    if isinstance(lo, tuple):
        return str(tuple(int(x) if float(x).is_integer() else float(x) for x in lo))
    return str(int(lo) if float(lo).is_integer() else float(lo))


def _constant(im: Image.Image) -> str | None:
    if im.mode == "F":
        return None  # judged on the array with the NaN count
    try:
        extrema = im.getextrema()
    except ValueError:  # a mode Pillow computes no extrema for (16-bit big-endian "I;16B"): the pixels say
        import numpy as np  # (here: numpy only for the files that need it; see png.py)

        pixels = np.asarray(im)
        if pixels.size == 0 or pixels.min() != pixels.max():
            return None
        return _value_text(pixels.flat[0].item())
    bands: list[Any] = [extrema] if not isinstance(extrema[0], tuple) else list(extrema)
    if all(lo == hi for lo, hi in bands):
        value = _value_text(tuple(lo for lo, _ in bands) if len(bands) > 1 else bands[0][0])
        return f"palette index {value}" if im.mode == "P" else value
    return _one_palette_colour(im) if im.mode == "P" else None


def _one_palette_colour(im: Image.Image) -> str | None:
    """The one colour of a palette image whose pixels use several palette entries that all hold it (a writer
    that did not merge equal entries): every loader's ``convert("RGB")`` makes it a constant image."""
    used = im.getcolors(256)
    if not used or len(used) > 16:  # (one colour in many entries: not worth a look)
        return None
    indices = sorted(index for _, index in used if isinstance(index, int))  # (a P image's colours: indices)
    strip = Image.new("P", (len(indices), 1))
    strip.putdata(indices)
    strip.putpalette(im.getpalette() or [])
    if "transparency" in im.info:
        strip.info["transparency"] = im.info["transparency"]
    colours = set(strip.convert("RGBA").getdata())
    if len(colours) != 1:
        return None
    (colour,) = colours
    shown = colour[:3] if colour[3] == 255 else colour
    return f"{_value_text(tuple(shown))} (palette indices {', '.join(map(str, indices))}, one colour)"


def _float_frame(im: Image.Image, page: int, verdict: Verdict) -> None:
    """NaN and Inf pixels of one frame (``page``: its number, named where the file has more than one)."""
    import numpy as np  # (here: numpy only for the files that need it; see png.py)

    arr = np.asarray(im, dtype=np.float32)
    nan = int(np.isnan(arr).sum())
    inf = int(np.isinf(arr).sum())
    verdict.nan += nan
    verdict.inf += inf
    if verdict.frames > 1:
        if nan:
            verdict.nan_pages += ((page, nan),)
        if inf:
            verdict.inf_pages += ((page, inf),)
    if verdict.frames == 1 and nan + inf == 0 and arr.size and float(arr.min()) == float(arr.max()):
        verdict.constant = _value_text(float(arr.flat[0]))


def judge(data: Any, verdict: Verdict, max_pixels: int, fallback: bool = False, constant: bool = True) -> None:
    """Decode every frame with Pillow and fill ``verdict`` (as the fallback judge: keep the format).
    ``constant=False``: a second opinion on damage only, which skips the constant-image test."""
    verdict.judge = "pillow"
    log = TiffLog() if tiff_log.is_tiff(data) else None  # libtiff's messages, kept off the terminal
    with _own_limits(max_pixels), warnings.catch_warnings(record=True) as caught, log or nullcontext():
        warnings.simplefilter("always")
        try:
            _judge(data, verdict, max_pixels, fallback, constant, log)
        except MemoryError:
            verdict.error = "out of memory while decoding"
        except Image.DecompressionBombError as exc:  # the size Pillow read on opening, or a nested image's
            verdict.bomb = _bomb_text(exc, max_pixels)
        except Exception as exc:  # whatever a decoder raises is the verdict on this file
            verdict.error = _reason(exc, data, verdict.format)
            if log is not None:  # libtiff's reason, printed before Pillow's bare "decoder error -2"
                damage, other = tiff_log.sort(log.take())
                if damage or other:
                    verdict.error += f"; {_on_page(log.page, verdict)}{tiff_log.text(damage + other)}"
        if log is not None and log.damaged_pages > PAGES_NAMED:
            verdict.damage.append(f"libtiff reported damaged data on {log.damaged_pages - PAGES_NAMED} more pages")
    for w in caught:
        if issubclass(w.category, DeprecationWarning | Image.DecompressionBombWarning):
            continue
        message = f"Pillow: {w.message}"
        if message not in verdict.damage:  # once, however often Pillow warned it (once per page ...)
            verdict.damage.append(message)


def _judge(data: Any, verdict: Verdict, max_pixels: int, fallback: bool, constant: bool, log: TiffLog | None) -> None:
    im = Image.open(io.BytesIO(data))
    try:
        if not fallback:
            verdict.format = FORMAT_BY_PILLOW.get(im.format or "", (im.format or "unknown").lower())
        width, height = im.size
        verdict.width, verdict.height = width, height
        if width * height > max_pixels:
            verdict.bomb = f"{width}×{height} = {width * height:,} pixels declared (limit {max_pixels:,})"
            return
        verdict.mode = im.mode
        if verdict.orientation is None and verdict.format not in ("jpeg", "png", "tiff"):
            # (a TIFF's orientation is applied by Pillow's load() itself, and by OpenCV: no loader gets it wrong)
            try:
                value = im.getexif().get(ORIENTATION_TAG)
            except Exception as exc:  # load() reads no EXIF: the pixels are fine, exif_transpose() raises
                verdict.damage.append(f"EXIF data Pillow cannot read ({exc}): ImageOps.exif_transpose() raises on it")
                value = None
            verdict.orientation = int(value) if isinstance(value, int) else None
        gif = _safely(gif_end, data) if verdict.format == "gif" and not fallback else None
        if gif is not None and gif[1] is not None and gif[1] != NO_TRAILER:
            verdict.error = gif[1]  # Pillow stops at the damage without an error: the frames after it are lost
            return
        frames = int(getattr(im, "n_frames", 1))
        verdict.frames = frames
        first = int(getattr(im, "_min_frame", 0))  # a PSD numbers its layers from 1 (0 is none)
        # the image as opened, then every frame (a PSD's merged image, then each of its layers)
        # (chained, not unpacked into a tuple: an APNG's acTL or a SPIDER stack may declare 2**31 frames that the
        # file does not hold, and the seek fails at the first missing one)
        for i in itertools.chain((None,), range(first or 1, first + frames)):
            if i is not None:
                im.seek(i)
                w, h = im.size
                if w * h > max_pixels:
                    verdict.bomb = f"frame {i}: {w}×{h} = {w * h:,} pixels declared (limit {max_pixels:,})"
                    return
            page = 0 if i is None else i
            if log is not None:
                log.page = page
            im.load()
            if log is not None:
                _libtiff_damage(log, page, verdict)
            if verdict.format == "tiff":
                _safely(_strips, data, im, page, verdict)
            elif i is None and verdict.format in PALETTE_CHECKED:
                _safely(_palette, im, verdict)
            if im.mode == "F":
                _float_frame(im, page, verdict)
            elif i is None and frames == 1 and constant:
                verdict.constant = _constant(im)
        if verdict.format == "tiff":
            _safely(_directory_loop, data, im, verdict)
        elif verdict.format == "ico" and not fallback and hasattr(im, "ico"):
            ico_damage(data, im, verdict, max_pixels)
            if verdict.error is not None or verdict.bomb is not None:
                return
        if frames > 1:
            im.seek(first)
        if verdict.mode == "P" and "transparency" in im.info:
            verdict.unusual = "P with transparency: a palette image whose alpha convert('RGB') drops"
        elif verdict.mode in UNUSUAL_MODES:
            verdict.unusual = UNUSUAL_MODES[verdict.mode]
    finally:
        im.close()
    if not fallback:
        _safely(_container_end, data, verdict, gif)


T = TypeVar("T")


def _safely(check: Callable[..., T], *args: Any) -> T | None:
    """One of dscan's own structure checks beside Pillow's decode (strips, palette, directories, container
    ends), which only adds damage: a flaw in it on a file Pillow reads (a tag of a type it did not expect) must
    not become the file's error. Pillow's verdict stands; the check finds nothing."""
    try:
        return check(*args)
    except MemoryError:
        raise
    except Exception:
        return None


def _palette(im: Image.Image, verdict: Verdict) -> None:
    """A pixel of the first frame whose index is beyond the palette: Pillow paints it black without a word
    (see ``palette``). Later GIF frames Pillow converts to RGB itself, so only the first is read as indices."""
    beyond = decoded_beyond(im)
    if beyond is not None:
        verdict.damage.append(beyond)


def _on_page(page: int, verdict: Verdict) -> str:
    """'page N, ' in a multi-page file (pages numbered from 0, as Pillow's ``seek`` numbers them), else ''."""
    return f"page {page}, " if verdict.frames > 1 else ""


def _libtiff_damage(log: TiffLog, page: int, verdict: Verdict) -> None:
    """What libtiff printed about damaged strips while Pillow decoded ``page`` (and decoded on): the messages
    of the first ``PAGES_NAMED`` damaged pages; the pages after them are counted."""
    damage, _ = tiff_log.sort(log.take())
    if damage:
        log.damaged_pages += 1
        if log.damaged_pages <= PAGES_NAMED:
            verdict.damage.append(f"{_on_page(page, verdict)}{tiff_log.text(damage)}")


def _directory_loop(data: Any, im: Image.Image, verdict: Verdict) -> None:
    """A TIFF whose last page's directory links on, where Pillow stopped: silently, and the pages after it
    are lost. The link is read from the file (Pillow's ``next`` is the directory's own offset when it could not
    read it): back to a directory already read (an IFD loop, which libtiff reports), to where no directory can
    be read, or not readable at all (the directory is cut short or overwritten: libtiff's "Sanity check on
    directory count failed")."""
    tags = getattr(im, "tag_v2", None)
    if not getattr(tags, "next", 0):
        return
    read = list(getattr(im, "_frame_pos", ()))
    page = verdict.frames - 1
    stops = f"Pillow stops there after {verdict.frames} page{'s' if verdict.frames > 1 else ''}"
    link, problem = _next_directory(data, read[-1]) if read else (0, "")
    if problem:
        verdict.damage.append(f"the directory of page {page} {problem} ({stops}; any pages after it are lost)")
    elif link in read:
        verdict.damage.append(
            f"the directory of page {page} links back to page {read.index(link)}'s (an IFD loop: {stops}; "
            "pages the link skips are lost)"
        )
    elif link:
        where = "beyond the end of the file" if link >= len(data) else "where no directory can be read"
        verdict.damage.append(f"the directory of page {page} links to byte {link:,}, {where} ({stops})")


def _next_directory(data: Any, offset: int) -> tuple[int, str]:
    """The link to the next directory stored in the TIFF directory at ``offset`` (classic or BigTIFF), or what
    keeps it from being read."""
    order: Literal["little", "big"] = "little" if bytes(data[:2]) == b"II" else "big"
    big = int.from_bytes(data[2:4], order) == 43
    count_size, entry_size, link_size = (8, 20, 8) if big else (2, 12, 4)
    if offset + count_size > len(data):
        return 0, "is cut short: the file ends inside it"
    count = int.from_bytes(data[offset : offset + count_size], order)
    at = offset + count_size + entry_size * count
    if at > len(data):
        entries = f"{count:,} entr{'y' if count == 1 else 'ies'}"
        return 0, f"is damaged or cut short: its {entries} run past the end of the file"
    if at + link_size > len(data):
        return 0, "is cut short: the file ends inside its link to the next directory"
    return int.from_bytes(data[at : at + link_size], order), ""


def _strips(data: Any, im: Image.Image, page: int, verdict: Verdict) -> None:
    """Damage libtiff's JPEG and Deflate codecs step over in a page (see ``tiff_jpeg``, ``tiff_strips``)."""
    tags = getattr(im, "tag_v2", None)
    if tags is None:
        return
    if tags.get(259) == 7:
        from .tiff_jpeg import jpeg_damage

        problem = jpeg_damage(data, tags)
    else:
        problem = deflate_damage(data, tags) or packbits_damage(data, tags)
    if problem is not None:
        verdict.damage.append(f"{_on_page(page, verdict)}{problem}")


def _container_end(data: Any, verdict: Verdict, gif: tuple[int, str | None, str | None] | None) -> None:
    """Trailing data and truncation by the container's own structure (``gif``: ``gif_end``'s answer); a BMP's
    end by its headers, and damage in its RLE data (see ``bmp``)."""
    if gif is not None:
        end, problem, stray = gif
        if stray is not None:
            verdict.damage.append(stray)
        if problem is not None:
            if problem == NO_TRAILER:
                verdict.damage.append(problem)
            else:
                verdict.error = verdict.error or problem
            return
    elif verdict.format == "webp":
        end = riff_end(data)
        if end > len(data):
            verdict.damage.append(f"the RIFF header declares {end:,} bytes, the file has {len(data):,}")
            return
    elif verdict.format == "bmp":
        layout = bmp_layout(data)
        if layout is None:
            return
        if layout.damage is not None:
            verdict.damage.append(layout.damage)
        end = layout.end
    else:
        return
    extra = len(data) - end
    if extra > 0:
        verdict.trailing = extra
        verdict.trailing_what = trailing_kind(data[end:])


def constant_value(data: Any) -> str | None:
    """The single value of an image whose every pixel is the same (first frame), else None."""
    with _own_limits(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with Image.open(io.BytesIO(data)) as im:
                im.load()
                return _constant(im)
        except Exception:
            return None


def palette_indices(data: Any) -> np.ndarray | None:
    """The palette indices of a palette image's first frame as Pillow decodes them (H, W), else None."""
    import numpy as np  # (here: numpy only for the files that need it; see png.py)

    with _own_limits(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with Image.open(io.BytesIO(data)) as im:
                return np.asarray(im) if im.mode == "P" else None
        except Exception:
            return None
