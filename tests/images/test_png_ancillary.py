"""PNG ancillary chunks: malformed ones are found, and Pillow (the loader) decides how bad they are.

Every case is a PNG written by Pillow with one chunk rewritten (its CRC recomputed, so only the chunk's
contents are wrong), added, or moved. Where Pillow refuses the file the verdict is an error (I003
corrupt-image) that states the spec's rule and Pillow's reason; where Pillow still loads it, the problem is
damage (I004 corrupt-image-data, a warning). Valid files with every checked chunk stay clean.
"""

from __future__ import annotations

import io
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageCms, PngImagePlugin, UnidentifiedImageError

from scanner_service import ScanConfig, scan
from scanner_service.imaging import Verdict, inspect_image
from scanner_service.imaging.png import inspect_png

# -- building and editing PNGs --------------------------------------------------------------------------


def chunk(ctype: bytes, body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + ctype + body + zlib.crc32(ctype + body).to_bytes(4, "big")


def chunk_list(data: bytes) -> list[tuple[bytes, bytes, int, int]]:
    """(type, body, start, end) of every chunk up to IEND."""
    out = []
    pos = 8
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        ctype = data[pos + 4 : pos + 8]
        end = pos + 12 + length
        out.append((ctype, data[pos + 8 : end - 4], pos, end))
        pos = end
        if ctype == b"IEND":
            break
    return out


def types(data: bytes) -> list[bytes]:
    return [c[0] for c in chunk_list(data)]


def body_of(data: bytes, ctype: bytes, nth: int = 0) -> bytes:
    return [c[1] for c in chunk_list(data) if c[0] == ctype][nth]


def rewrite(data: bytes, ctype: bytes, body: bytes | Callable[[bytes], bytes], nth: int = 0) -> bytes:
    """``data`` with the ``nth`` chunk of ``ctype`` given a new body (a CRC recomputed to match)."""
    _, old, start, end = [c for c in chunk_list(data) if c[0] == ctype][nth]
    new = body(old) if callable(body) else body
    return data[:start] + chunk(ctype, new) + data[end:]


def insert(data: bytes, before: bytes, ctype: bytes, body: bytes) -> bytes:
    """``data`` with a new chunk right before the first chunk of type ``before``."""
    start = next(c[2] for c in chunk_list(data) if c[0] == before)
    return data[:start] + chunk(ctype, body) + data[start:]


def remove(data: bytes, ctype: bytes) -> tuple[bytes, bytes]:
    """``data`` without the first chunk of ``ctype``, and that chunk's body."""
    _, body, start, end = next(c for c in chunk_list(data) if c[0] == ctype)
    return data[:start] + data[end:], body


def after_idat(data: bytes, ctype: bytes, body: bytes | None = None) -> bytes:
    """``data`` with its ``ctype`` chunk (or a new one with ``body``) moved to just before IEND."""
    if body is None:
        data, body = remove(data, ctype)
    return insert(data, b"IEND", ctype, body)


def save(image: Image.Image, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG", **options)
    return out.getvalue()


def pixels(mode: str, size: tuple[int, int] = (24, 16)) -> Image.Image:
    rng = np.random.default_rng(7)
    w, h = size
    bands = len(Image.new(mode, (1, 1)).getbands())
    if mode == "I;16":
        return Image.fromarray(rng.integers(0, 65536, (h, w), dtype=np.uint16))
    arr = rng.integers(0, 256, (h, w, bands) if bands > 1 else (h, w), dtype=np.uint8)
    return Image.fromarray(arr).convert(mode) if mode not in ("RGB", "RGBA", "L") else Image.fromarray(arr, mode)


def palette_image(colours: int = 16) -> Image.Image:
    im = Image.fromarray((np.arange(24 * 16).reshape(16, 24) % colours).astype(np.uint8), "P")
    im.putpalette(bytes(np.arange(3 * colours, dtype=np.uint8) * 5))
    return im


ICC = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def exif() -> Image.Exif:
    e = Image.Exif()
    e[0x0112] = 1
    return e


def rgb_info() -> PngImagePlugin.PngInfo:
    info = PngImagePlugin.PngInfo()
    info.add(b"gAMA", (45455).to_bytes(4, "big"))
    info.add(b"cHRM", b"".join(v.to_bytes(4, "big") for v in (31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000)))
    info.add(b"sBIT", bytes([8, 8, 8]))
    info.add(b"tIME", (2024).to_bytes(2, "big") + bytes([2, 29, 23, 59, 60]))
    info.add(b"sPLT", b"six colours\x00\x08" + bytes(range(36)))
    info.add(b"bKGD", bytes(6))
    info.add_text("Title", "A title")
    info.add_text("Comment", "compressed " * 20, zip=True)
    info.add_itxt("Description", "déjà vu ✓", lang="fr", tkey="Déscription")
    info.add_itxt("XML:com.adobe.xmp", "<x:xmpmeta/>", zip=True)
    return info


def rgb_full() -> bytes:
    """RGB with iCCP, gAMA, cHRM, sBIT, tIME, sPLT, tRNS, pHYs, bKGD, tEXt, zTXt, iTXt (both kinds), eXIf."""
    return save(pixels("RGB"), pnginfo=rgb_info(), icc_profile=ICC, transparency=(1, 2, 3), dpi=(72, 72), exif=exif())


def palette_full() -> bytes:
    """Palette with sRGB, gAMA, sBIT, PLTE, tRNS, bKGD, hIST, pHYs."""
    info = PngImagePlugin.PngInfo()
    info.add(b"sRGB", b"\x00")
    info.add(b"gAMA", (45455).to_bytes(4, "big"))
    info.add(b"sBIT", bytes([5, 6, 5]))
    info.add(b"bKGD", b"\x03")
    info.add(b"hIST", bytes(32))
    return save(palette_image(16), pnginfo=info, transparency=bytes(range(0, 160, 10)), dpi=(300, 300))


def gray16_full() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add(b"sBIT", b"\x0c")
    info.add(b"bKGD", (4000).to_bytes(2, "big"))
    return save(pixels("I;16"), pnginfo=info, transparency=1234)


def gray_alpha_full() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add(b"sBIT", b"\x08\x04")
    info.add(b"bKGD", b"\x00\x80")
    return save(pixels("LA"), pnginfo=info)


def apng() -> bytes:
    frames = [Image.new("RGB", (16, 12), (40 * i, 90, 200 - 40 * i)) for i in range(3)]
    return save(frames[0], save_all=True, append_images=frames[1:], duration=40, loop=0, pnginfo=rgb_info())


VALID: dict[str, tuple[Callable[[], bytes], set[bytes]]] = {
    "rgb": (
        rgb_full,
        {b"iCCP", b"gAMA", b"cHRM", b"sBIT", b"tIME", b"sPLT", b"tRNS", b"pHYs", b"bKGD", b"tEXt", b"zTXt", b"iTXt"}
        | {b"eXIf"},
    ),
    "palette": (palette_full, {b"sRGB", b"gAMA", b"sBIT", b"PLTE", b"tRNS", b"bKGD", b"hIST", b"pHYs"}),
    "gray16": (gray16_full, {b"sBIT", b"bKGD", b"tRNS"}),
    "gray+alpha": (gray_alpha_full, {b"sBIT", b"bKGD"}),
    "apng": (apng, {b"acTL", b"fcTL", b"fdAT", b"gAMA", b"cHRM", b"tEXt", b"zTXt", b"iTXt", b"sPLT"}),
    "text after IDAT": (lambda: after_idat(rgb_full(), b"tEXt"), {b"tEXt"}),
    "eXIf after IDAT": (lambda: after_idat(rgb_full(), b"eXIf"), {b"eXIf"}),
    "empty tRNS in a palette image": (lambda: rewrite(palette_full(), b"tRNS", b""), {b"tRNS"}),
}


def load_every_frame(data: bytes) -> None:
    """What a loader does with the file: Pillow opens it and decodes every frame (its warnings ignored)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Image.open(io.BytesIO(data)) as im:
            for frame in range(getattr(im, "n_frames", 1)):
                im.seek(frame)
                im.load()


def never(data: Any, verdict: Verdict) -> None:
    raise AssertionError("the loader was asked about a clean file")


# -- valid files stay clean -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VALID)
def test_valid_ancillary_chunks_stay_clean(name: str) -> None:
    build, expected = VALID[name]
    data = build()
    assert expected <= set(types(data)), f"the builder lost a chunk: {expected - set(types(data))}"
    load_every_frame(data)  # the loader agrees the file is fine
    v = inspect_image(data, "x.png")
    assert (v.error, v.damage, v.judge) == (None, [], "png")
    # a clean file never costs a Pillow decode: the loader is not even asked
    direct = Verdict(format="png")
    inspect_png(data, direct, 10**9, lambda _: None, never)
    assert (direct.error, direct.damage) == (None, [])


# -- malformations Pillow refuses: errors -----------------------------------------------------------------

LIMIT = PngImagePlugin.MAX_TEXT_CHUNK
BIG = zlib.compress(bytes(LIMIT + 1024), 9)

FATAL: dict[str, tuple[Callable[[], bytes], tuple[str, ...]]] = {
    "short gAMA": (
        lambda: rewrite(rgb_full(), b"gAMA", b"\x00\x00\xb1"),
        ("gAMA chunk is 3 bytes (the PNG spec says 4)", "Truncated gAMA chunk"),
    ),
    "short cHRM": (
        lambda: rewrite(rgb_full(), b"cHRM", lambda b: b[:31]),
        ("cHRM chunk is 31 bytes (the PNG spec says 32)", "Truncated cHRM chunk"),
    ),
    "empty sRGB": (
        lambda: rewrite(palette_full(), b"sRGB", b""),
        ("sRGB chunk is 0 bytes (the PNG spec says 1)", "Truncated sRGB chunk"),
    ),
    "short pHYs": (
        lambda: rewrite(rgb_full(), b"pHYs", lambda b: b[:8]),
        ("pHYs chunk is 8 bytes (the PNG spec says 9)", "Truncated pHYs chunk"),
    ),
    "1-byte tRNS in RGB": (
        lambda: rewrite(rgb_full(), b"tRNS", b"\x01"),
        ("tRNS chunk is 1 byte (the PNG spec says 6 for RGB images)", "Truncated tRNS chunk"),
    ),
    "1-byte tRNS in grayscale": (
        lambda: rewrite(gray16_full(), b"tRNS", b"\x01"),
        ("tRNS chunk is 1 byte (the PNG spec says 2 for grayscale images)", "Truncated tRNS chunk"),
    ),
    "short acTL": (
        lambda: rewrite(apng(), b"acTL", b"\x00\x00\x00\x03"),
        ("acTL chunk is 4 bytes (the APNG spec says 8)", "APNG contains truncated acTL chunk"),
    ),
    "empty iCCP": (lambda: rewrite(rgb_full(), b"iCCP", b""), ("iCCP chunk is empty", "cannot identify")),
    "iCCP without a method": (
        lambda: rewrite(rgb_full(), b"iCCP", b"ICC Profile\x00"),
        ("iCCP chunk ends before its compression method", "cannot identify"),
    ),
    "iCCP with method 1": (
        lambda: rewrite(rgb_full(), b"iCCP", lambda b: b[:12] + b"\x01" + b[13:]),
        ("iCCP chunk: unknown compression method 1 (the PNG spec defines only 0)", "cannot identify"),
    ),
    "iCCP with method 5 after IDAT": (
        lambda: after_idat(rewrite(rgb_full(), b"iCCP", lambda b: b[:12] + b"\x05" + b[13:]), b"iCCP"),
        (
            "iCCP chunk: unknown compression method 5",
            "iCCP chunk after the image data (the PNG spec puts it before IDAT)",
            "Unknown compression method 5 in iCCP chunk",
        ),
    ),
    "zTXt with method 7": (
        lambda: rewrite(rgb_full(), b"zTXt", lambda b: b.replace(b"Comment\x00\x00", b"Comment\x00\x07")),
        ("zTXt chunk: unknown compression method 7 (the PNG spec defines only 0)", "cannot identify"),
    ),
    "zTXt with method 7 after IDAT": (
        lambda: after_idat(rgb_full(), b"zTXt", b"Comment\x00\x07" + zlib.compress(b"text")),
        ("zTXt chunk: unknown compression method 7", "Unknown compression method 7 in zTXt chunk"),
    ),
    "iCCP beyond Pillow's limit": (
        lambda: rewrite(rgb_full(), b"iCCP", b"ICC Profile\x00\x00" + BIG),
        (f"iCCP chunk inflates to more than {LIMIT:,} bytes", "MAX_TEXT_CHUNK", "Decompressed data too large"),
    ),
    "zTXt beyond Pillow's limit": (
        lambda: rewrite(rgb_full(), b"zTXt", b"Comment\x00\x00" + BIG),
        ("zTXt chunk inflates to more than", "Decompressed data too large"),
    ),
    "iTXt beyond Pillow's limit": (
        lambda: rewrite(rgb_full(), b"iTXt", b"Description\x00\x01\x00\x00\x00" + BIG),
        ("iTXt chunk inflates to more than", "Decompressed data too large"),
    ),
}


@pytest.mark.parametrize("name", FATAL)
def test_malformed_chunks_pillow_refuses_are_errors(name: str) -> None:
    build, expected = FATAL[name]
    data = build()
    with pytest.raises((ValueError, SyntaxError, UnidentifiedImageError)):  # the premise: Pillow refuses it
        load_every_frame(data)
    v = inspect_image(data, "x.png")
    assert v.error is not None and not v.usable, v
    assert v.damage == []
    for text in expected:
        assert text in v.error, (text, v.error)
    assert "(Pillow: " in v.error and v.judge == "png"


# -- malformations Pillow still loads: damage -------------------------------------------------------------


def _duplicate(data: bytes, ctype: bytes) -> bytes:
    return insert(data, ctype, ctype, body_of(data, ctype))


DAMAGED: dict[str, tuple[Callable[[], bytes], str]] = {
    "long gAMA": (lambda: rewrite(rgb_full(), b"gAMA", bytes(5)), "gAMA chunk is 5 bytes (the PNG spec says 4)"),
    "gamma 0": (lambda: rewrite(rgb_full(), b"gAMA", bytes(4)), "gAMA chunk: gamma 0"),
    "long cHRM": (lambda: rewrite(rgb_full(), b"cHRM", lambda b: b + b"\x00"), "cHRM chunk is 33 bytes"),
    "sRGB intent 9": (lambda: rewrite(palette_full(), b"sRGB", b"\x09"), "sRGB chunk: rendering intent 9"),
    "pHYs unit 5": (lambda: rewrite(rgb_full(), b"pHYs", lambda b: b[:8] + b"\x05"), "pHYs chunk: unit 5"),
    "7-byte tRNS in RGB": (lambda: rewrite(rgb_full(), b"tRNS", bytes(7)), "tRNS chunk is 7 bytes"),
    "tRNS in RGBA": (
        lambda: insert(save(pixels("RGBA")), b"IDAT", b"tRNS", bytes(6)),
        "tRNS chunk in an image with an alpha channel (RGBA)",
    ),
    "tRNS longer than the palette": (
        lambda: rewrite(palette_full(), b"tRNS", bytes(20)),
        "tRNS chunk has 20 entries, the palette 16",
    ),
    "tRNS before PLTE": (
        lambda: insert(remove(palette_full(), b"tRNS")[0], b"PLTE", b"tRNS", bytes(4)),
        "tRNS chunk before PLTE",
    ),
    "PLTE after IDAT": (
        lambda: after_idat(save(palette_image(16)), b"PLTE"),
        "PLTE chunk after the image data (the PNG spec puts it before IDAT)",
    ),
    "PLTE in a grayscale image": (
        lambda: insert(save(pixels("L")), b"IDAT", b"PLTE", bytes(48)),
        "PLTE chunk in a grayscale image",
    ),
    "two PLTE chunks": (lambda: _duplicate(save(palette_image(16)), b"PLTE"), "more than one PLTE chunk"),
    "PLTE beyond the bit depth": (
        lambda: rewrite(save(palette_image(4)), b"PLTE", bytes(15)),
        "PLTE chunk has 5 entries, more than a 2-bit image can index (4)",
    ),
    "two gAMA chunks": (lambda: _duplicate(rgb_full(), b"gAMA"), "more than one gAMA chunk"),
    "gAMA after PLTE": (
        lambda: insert(remove(palette_full(), b"gAMA")[0], b"IDAT", b"gAMA", (45455).to_bytes(4, "big")),
        "gAMA chunk after PLTE",
    ),
    "pHYs after IDAT": (lambda: after_idat(rgb_full(), b"pHYs"), "pHYs chunk after the image data"),
    "iCCP with damaged zlib": (
        lambda: rewrite(rgb_full(), b"iCCP", b"ICC Profile\x00\x00garbage"),
        "iCCP chunk: invalid compressed data",
    ),
    "iCCP without a name": (lambda: rewrite(rgb_full(), b"iCCP", lambda b: b[11:]), "iCCP chunk: empty profile name"),
    "zTXt with damaged zlib": (
        lambda: rewrite(rgb_full(), b"zTXt", b"Comment\x00\x00garbage"),
        "zTXt chunk: invalid compressed data",
    ),
    "truncated zTXt": (
        lambda: rewrite(rgb_full(), b"zTXt", lambda b: b[:-6]),
        "zTXt chunk: the compressed data is truncated",
    ),
    "tEXt without a separator": (
        lambda: rewrite(rgb_full(), b"tEXt", b"Title"),
        "tEXt chunk: no null separator after the keyword",
    ),
    "tEXt with an empty keyword": (lambda: rewrite(rgb_full(), b"tEXt", b"\x00text"), "tEXt chunk: empty keyword"),
    "tEXt keyword with two spaces": (
        lambda: rewrite(rgb_full(), b"tEXt", b"A  title\x00text"),
        "tEXt chunk: keyword 'A  title' has characters or spaces the PNG spec forbids",
    ),
    "tEXt keyword of 80 bytes": (
        lambda: rewrite(rgb_full(), b"tEXt", b"k" * 80 + b"\x00text"),
        "tEXt chunk: a keyword longer than 79 bytes",
    ),
    "tEXt with a null in the text": (
        lambda: rewrite(rgb_full(), b"tEXt", b"Title\x00te\x00xt"),
        "tEXt chunk: a null byte in the text",
    ),
    "iTXt compression flag 2": (
        lambda: rewrite(rgb_full(), b"iTXt", b"Title\x00\x02\x00\x00\x00text"),
        "iTXt chunk: compression flag 2",
    ),
    "iTXt compression method 3": (
        lambda: rewrite(rgb_full(), b"iTXt", b"Title\x00\x01\x03\x00\x00" + zlib.compress(b"text")),
        "iTXt chunk: unknown compression method 3",
    ),
    "iTXt without separators": (
        lambda: rewrite(rgb_full(), b"iTXt", b"Title\x00\x00\x00en"),
        "iTXt chunk: no null separators after the language tag",
    ),
    "iTXt that is not UTF-8": (
        lambda: rewrite(rgb_full(), b"iTXt", b"Title\x00\x00\x00\x00\x00\xff\xfe"),
        "iTXt chunk: the translated keyword or the text is not valid UTF-8",
    ),
    "sBIT of the wrong length": (lambda: rewrite(rgb_full(), b"sBIT", b"\x08"), "sBIT chunk is 1 byte"),
    "sBIT of 0 bits": (lambda: rewrite(gray16_full(), b"sBIT", b"\x00"), "sBIT chunk: significant bits (0,)"),
    "sBIT above the depth": (
        lambda: rewrite(gray_alpha_full(), b"sBIT", b"\x08\x09"),
        "sBIT chunk: significant bits (8, 9) outside 1-8",
    ),
    "bKGD of the wrong length": (lambda: rewrite(rgb_full(), b"bKGD", bytes(2)), "bKGD chunk is 2 bytes"),
    "bKGD beyond the palette": (
        lambda: rewrite(palette_full(), b"bKGD", b"\x20"),
        "bKGD chunk: palette index 32 beyond the 16-entry palette",
    ),
    "hIST without PLTE": (
        lambda: insert(save(pixels("RGB")), b"IDAT", b"hIST", bytes(32)),
        "hIST chunk without a PLTE chunk",
    ),
    "hIST of the wrong length": (lambda: rewrite(palette_full(), b"hIST", bytes(30)), "hIST chunk is 30 bytes"),
    "tIME of the wrong length": (
        lambda: rewrite(rgb_full(), b"tIME", bytes(6)),
        "tIME chunk is 6 bytes (the PNG spec says 7)",
    ),
    "tIME in month 13": (
        lambda: rewrite(rgb_full(), b"tIME", (2024).to_bytes(2, "big") + bytes([13, 1, 0, 0, 0])),
        "tIME chunk: invalid time 2024-13-01",
    ),
    "sPLT of depth 7": (lambda: rewrite(rgb_full(), b"sPLT", b"p\x00\x07" + bytes(6)), "sPLT chunk: sample depth 7"),
    "sPLT with a partial entry": (
        lambda: rewrite(rgb_full(), b"sPLT", lambda b: b[:-1]),
        "sPLT chunk: 35 bytes of entries, not a multiple of 6",
    ),
    "eXIf without a TIFF header": (
        lambda: rewrite(rgb_full(), b"eXIf", b"garbage!"),
        "eXIf chunk does not start with a TIFF header",
    ),
    "short eXIf": (lambda: rewrite(rgb_full(), b"eXIf", b"MM\x00*\x00"), "eXIf chunk is 5 bytes"),
    "empty eXIf": (lambda: rewrite(rgb_full(), b"eXIf", b""), "eXIf chunk is empty"),
    "acTL of 0 frames": (
        lambda: rewrite(apng(), b"acTL", lambda b: bytes(4) + b[4:]),
        "acTL chunk declares 0 frames",
    ),
    "long acTL": (lambda: rewrite(apng(), b"acTL", lambda b: b + b"\x00"), "acTL chunk is 9 bytes"),
    "long fcTL": (lambda: rewrite(apng(), b"fcTL", lambda b: b + b"\x00", 1), "fcTL chunk is 27 bytes"),
    "fcTL dispose 7": (
        lambda: rewrite(apng(), b"fcTL", lambda b: b[:24] + b"\x07" + b[25:], 1),
        "fcTL chunk: dispose operation 7",
    ),
    "fcTL blend 7": (lambda: rewrite(apng(), b"fcTL", lambda b: b[:25] + b"\x07", 2), "fcTL chunk: blend operation 7"),
}


@pytest.mark.parametrize("name", DAMAGED)
def test_malformed_chunks_pillow_loads_are_damage(name: str) -> None:
    build, expected = DAMAGED[name]
    data = build()
    load_every_frame(data)  # the premise: Pillow loads every frame
    v = inspect_image(data, "x.png")
    assert v.error is None and v.usable, v.error
    assert any(expected in d for d in v.damage), (expected, v.damage)
    assert v.judge == "png"


# -- the loader decides; its limits alone are no damage ---------------------------------------------------


def test_the_loader_decides_the_severity() -> None:
    data = rewrite(rgb_full(), b"gAMA", bytes(5))
    calls: list[bytes] = []

    def refuses(d: Any, verdict: Verdict, constant: bool = True) -> None:
        calls.append(bytes(d))
        verdict.error = "no such luck"

    def loads(d: Any, verdict: Verdict, constant: bool = True) -> None:
        calls.append(bytes(d))

    v = Verdict(format="png")
    inspect_png(data, v, 10**9, lambda _: None, refuses)
    assert v.error == "gAMA chunk is 5 bytes (the PNG spec says 4) (Pillow: no such luck)" and v.damage == []
    v = Verdict(format="png")
    inspect_png(data, v, 10**9, lambda _: None, loads)
    assert v.error is None and v.damage == ["gAMA chunk is 5 bytes (the PNG spec says 4)"]
    assert calls == [data, data]


def test_pillow_limits_are_read_when_used_and_are_no_damage(monkeypatch: pytest.MonkeyPatch) -> None:
    data = rewrite(rgb_full(), b"iCCP", b"ICC Profile\x00\x00" + BIG)  # a valid profile, larger than Pillow allows
    assert inspect_image(data, "x.png").error is not None
    monkeypatch.setattr(PngImagePlugin, "MAX_TEXT_CHUNK", 4 * LIMIT)
    v = inspect_image(data, "x.png")
    assert (v.error, v.damage) == (None, [])


def test_many_problems_are_summarised() -> None:
    data = rgb_full()
    for ctype, body in ((b"gAMA", bytes(3)), (b"cHRM", bytes(3)), (b"pHYs", bytes(3)), (b"sBIT", bytes(1))):
        data = rewrite(data, ctype, body)
    v = inspect_image(data, "x.png")
    assert v.error is not None
    shown, _, rest = v.error.partition(" (and 1 more) ")
    assert shown.count("; ") == 2 and "gAMA chunk is 3 bytes" in shown and rest == "(Pillow: Truncated gAMA chunk)"


# -- what a scan reports ----------------------------------------------------------------------------------


def test_scan_reports_errors_and_warnings(tmp_path: Path) -> None:
    names: dict[str, str] = {}
    for kind, cases in (("fatal", FATAL), ("damaged", DAMAGED)):
        for i, (name, case) in enumerate(cases.items()):
            path = f"{kind}_{i:02}.png"
            (tmp_path / path).write_bytes(case[0]())
            names[path] = name
    for name, (build, _) in VALID.items():
        (tmp_path / f"valid_{name.replace(' ', '_')}.png").write_bytes(build())
    report = scan(tmp_path, ScanConfig(max_locations=500), workers=0)
    by_code = {f.code: f for f in report.findings}
    corrupt, damaged = by_code["I003"], by_code["I004"]
    assert corrupt.severity.value == "error" and damaged.severity.value == "warning"
    assert {loc.path for loc in corrupt.locations} == {p for p in names if p.startswith("fatal")}
    assert {loc.path for loc in damaged.locations} == {p for p in names if p.startswith("damaged")}
    for loc in corrupt.locations:
        assert FATAL[names[loc.path]][1][0] in (loc.detail or ""), loc
    for loc in damaged.locations:
        assert DAMAGED[names[loc.path]][1] in (loc.detail or ""), loc
    assert not any(loc.path.startswith("valid_") for loc in corrupt.locations + damaged.locations)


def test_an_exif_prefix_in_exif_is_read_as_pillow_reads_it() -> None:
    """Some writers start eXIf with JPEG's ``Exif\\0\\0``: against the spec, but Pillow skips it (getexif and
    exif_transpose work). No damage then, and the orientation inside still counts."""
    rotated = Image.Exif()
    rotated[0x0112] = 6
    tiff = rotated.tobytes()
    tiff = tiff[6:] if tiff.startswith(b"Exif\x00\x00") else tiff
    for body in (tiff, b"Exif\x00\x00" + tiff):
        data = rewrite(rgb_full(), b"eXIf", body)
        with Image.open(io.BytesIO(data)) as im:
            assert im.getexif().get(0x0112) == 6
        v = inspect_image(data, "r.png")
        assert (v.error, v.damage, v.orientation) == (None, [], 6), body[:8]
