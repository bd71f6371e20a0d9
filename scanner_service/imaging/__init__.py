"""Inspecting encoded images: is it an image, does it decode, what will it do to training code.

The stable interface, for every source that holds encoded images (image folders and lists, LMDB values):

- ``inspect_image(data, name="", max_pixels=...) -> Verdict``: one pass over the bytes; never raises.
  ``name`` is the file name (its extension is compared with the content), '' when there is none.
- ``Verdict``: plain data the image checks read (see ``verdict.py``).
- ``decoder_entry(verdict) -> (info key, description) | None``: which decoder, which version judged it,
  for the report's ``info`` (decoders disagree between versions).

Who judges what: JPEG, strict libjpeg-turbo via simplejpeg at 1/8 scale (``jpeg.py``; Pillow where the
TurboJPEG interface refuses a file); PNG, a structural check (``png.py``); everything else Pillow, every
frame (``pillow.py``). Content types come from magic bytes (``sniff.py``), never from the extension.
"""

from __future__ import annotations

import functools
import importlib
import re
from types import ModuleType
from typing import Any

from .sniff import (
    UNREADABLE,
    ZEROS,
    claimed_format,
    content,
    damaged_bmp_header,
    damaged_gif_signature,
    damaged_png_signature,
    sniff,
)
from .verdict import Verdict

# The decoders (jpeg: simplejpeg; pillow: Pillow; png: ISA-L) are imported on the first image, so scans of
# other formats start without them.

DEFAULT_MAX_PIXELS = 178_956_970
"""Twice Pillow's own limit (the point where Pillow raises DecompressionBombError)."""

WEAK_MAGIC = frozenset({"tga"})
"""Formats Pillow recognises without a reliable signature: trusted only when the extension claims them."""

JPEG_SOI = b"\xff\xd8"

PRIMARY = {"jpeg": "jpeg", "png": "png"}
"""The judge of a format when nothing falls back (Pillow for every other format)."""


def inspect_image(data: bytes | memoryview, name: str = "", max_pixels: int = DEFAULT_MAX_PIXELS) -> Verdict:
    """Inspect one encoded image. Never raises: whatever goes wrong is in the verdict."""
    verdict = Verdict()
    if len(data) == 0:
        verdict.empty = True
        return verdict
    fmt = sniff(data[:1024])  # (64 bytes name every format; an SVG's XML prologue may take more)
    if fmt is None and bytes(data[:2]) == JPEG_SOI:
        fmt = "jpeg"  # a JPEG's start-of-image marker, then no marker (a damaged byte) or nothing: libjpeg says
    if fmt is None:
        _without_magic(data, name, verdict, max_pixels)
        return verdict
    verdict.format = fmt
    if fmt in UNREADABLE:
        verdict.error = UNREADABLE[fmt]
        return verdict
    try:
        if fmt == "jpeg":
            _decoder("jpeg").inspect_jpeg(data, verdict, max_pixels, _pillow_fallback(max_pixels))
        elif fmt == "png":
            _decoder("png").inspect_png(data, verdict, max_pixels, _constant_value, _pillow_fallback(max_pixels))
        else:
            _decoder("pillow").judge(data, verdict, max_pixels)
    except MemoryError:
        verdict.error = "out of memory while decoding"
    except Exception:  # a flaw in a parser here must not become a false error: Pillow decides
        second = Verdict(format=fmt)
        _decoder("pillow").judge(data, second, max_pixels, fallback=True)
        return second
    return verdict


@functools.cache
def _decoder(name: str) -> ModuleType:
    """The module of one judge (``jpeg``, ``png``, ``pillow``), imported on first use and then kept at hand:
    a scan of one image costs no import statement per image."""
    return importlib.import_module(f"{__name__}.{name}")


def warm_up_decoders() -> None:
    """Import the JPEG and PNG judges and look up their versions now, as the first image would."""
    for judge in ("jpeg", "png"):
        _decoder(judge)
        _describe_judge(judge, judge)


def _constant_value(data: Any) -> str | None:
    constant: str | None = _decoder("pillow").constant_value(data)
    return constant


@functools.cache
def _pillow_fallback(max_pixels: int) -> Any:
    """Pillow's full judge, for the JPEG and PNG checks to hand a file over to (the loader decides).
    Pillow is imported when a file is handed over, not before."""

    def fallback(data: Any, verdict: Verdict, constant: bool = True) -> None:
        _decoder("pillow").judge(data, verdict, max_pixels, fallback=True, constant=constant)

    return fallback


def _without_magic(data: bytes | memoryview, name: str, verdict: Verdict, max_pixels: int) -> None:
    """Content no signature matches: a PNG whose signature is damaged, a format Pillow knows without a
    signature (TGA, XPM ...), else no image."""
    damaged = damaged_png_signature(data[:24])
    if damaged is not None:
        verdict.format = "png"
        verdict.judge = "png"  # judged here, by the PNG structure check's signature test
        verdict.error = damaged
        return
    damaged = damaged_gif_signature(data[:6])
    if damaged is not None:  # Pillow cannot identify it: its reason, after what happened
        verdict.format = "gif"
        _decoder("pillow").judge(data, verdict, max_pixels, fallback=True)
        verdict.error = f"{damaged} (Pillow: {(verdict.error or 'reads it').removeprefix('Pillow ')})"
        return
    what, certain = content(data[:512])
    if certain:  # a web page, JSON, an archive ...: no decoder to ask
        verdict.format = None
        verdict.content = what
        return
    if damaged_bmp_header(data[:18], len(data), name):
        verdict.format = "bmp"  # Pillow's BMP reader names the damage ("Unsupported BMP header type (41)")
        _decoder("pillow").judge(data, verdict, max_pixels, fallback=True)
        return
    probe = Verdict()
    _decoder("pillow").judge(data, probe, max_pixels)
    if probe.bomb is not None and probe.format is None and claimed_format(name) in WEAK_MAGIC:
        probe.format = claimed_format(name)  # Pillow read the header its extension names, and refused its size
    known = probe.format is not None and probe.format != "unknown"
    if known and (probe.format not in WEAK_MAGIC or claimed_format(name) == probe.format):
        for slot in Verdict.__slots__:
            setattr(verdict, slot, getattr(probe, slot))
        return
    verdict.format = None
    verdict.content = what if what != ZEROS or not any(data) else _zero_head(data)


def _zero_head(data: bytes | memoryview) -> str:
    """What a file whose first bytes only are zero is: ``content`` saw its head; the rest holds data."""
    first = next(i for i, byte in enumerate(bytes(data)) if byte)  # (there is one: the caller checked)
    return f"{first:,} zero bytes, then data (its start overwritten or never written: the header is lost)"


@functools.cache
def _libjpeg_turbo_version() -> str:
    """The libjpeg-turbo version built into simplejpeg (it reports none; the library names itself)."""
    from pathlib import Path  # (here: the head start imports this package before anything imports pathlib)

    import simplejpeg

    try:
        for lib in Path(simplejpeg.__file__).parent.glob("_jpeg*"):
            found = re.search(rb"libjpeg-turbo version ([0-9.]+)", lib.read_bytes())
            if found:
                return found.group(1).decode()
    except OSError:
        pass
    return "(version unknown)"


@functools.cache
def _describe_judge(judge_key: str, fmt: str) -> str:
    if judge_key == "jpeg":
        import simplejpeg

        return f"libjpeg-turbo {_libjpeg_turbo_version()} via simplejpeg {simplejpeg.__version__} (strict)"
    if judge_key == "png":
        import isal

        inflater = f"ISA-L {isal.ISAL_VERSION} via isal {isal.__version__}"
        return f"dscan PNG structure check (chunk CRCs; IDAT inflated with {inflater})"
    import PIL  # only here: a worker that meets no file for Pillow never imports it
    from PIL import features

    library = {"jpeg": "jpg", "tiff": "libtiff", "webp": "webp", "jpeg2000": "jpg_2000", "avif": "avif"}.get(fmt)
    if library == "jpg" and features.check("libjpeg_turbo"):
        library = "libjpeg_turbo"  # 'jpg' is the version of libjpeg's API (6.2), not of the library
    version = features.version(library) if library else None
    names = {
        "jpg": "libjpeg",
        "libjpeg_turbo": "libjpeg-turbo",
        "jpg_2000": "openjpeg",
        "webp": "libwebp",
        "avif": "libavif",
    }
    suffix = f" ({names.get(library or '', library)} {version})" if library and version else ""
    return f"Pillow {PIL.__version__}{suffix}"


def decoder_entry(verdict: Verdict) -> tuple[str, str] | None:
    """The report ``info`` entry naming the decoder that judged ``verdict`` (None if none decoded)."""
    if not verdict.judge or verdict.format is None:
        return None
    fmt = verdict.format
    key = f"decoder.{fmt}" if PRIMARY.get(fmt, "pillow") == verdict.judge else f"decoder.{fmt}.fallback"
    return key, _describe_judge(verdict.judge, fmt)


def judge_label(verdict: Verdict) -> str:
    """A short name of the judging decoder for finding details ('libjpeg-turbo 3.1.2', 'Pillow 13.0.0')."""
    if verdict.judge == "jpeg":
        return f"libjpeg-turbo {_libjpeg_turbo_version()}"
    if verdict.judge == "png":
        return "PNG structure check"
    import PIL

    return f"Pillow {PIL.__version__}"


__all__ = [
    "DEFAULT_MAX_PIXELS",
    "Verdict",
    "claimed_format",
    "decoder_entry",
    "inspect_image",
    "judge_label",
    "warm_up_decoders",
]
