"""Gaps a probe of ML image layouts found: a BMP or GIF pixel whose palette index is beyond the palette
(reported for PNG only), and a PackBits TIFF strip that unpacks to more bytes than its rows hold (libtiff drops
the surplus without a word)."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import chunk, codes, encode, finding, inspected_with_peak, natural, scan_dir
from PIL import Image

from scanner_service.imaging import inspect_image

Write = Callable[[str, bytes], Path]

# -- palette indices beyond a BMP's or GIF's palette -----------------------------------------------------


def bmp8(pixels: np.ndarray, colours: int) -> bytes:
    """An uncompressed 8-bit BMP of the (H, W) ``pixels`` with a palette of ``colours`` (biClrUsed) entries that
    are no gray ramp (Pillow reads a gray ramp as mode L, where an index is its own gray value)."""
    height, width = pixels.shape
    palette = b"".join(bytes([i * 37 % 256, i * 91 % 256, 255 - i, 0]) for i in range(colours))
    stride = (width + 3) // 4 * 4
    rows = b"".join(bytes(row.tolist()) + bytes(stride - width) for row in pixels[::-1])
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 0, len(rows), 2835, 2835, colours, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + info + palette + rows


def _lzw_9bit(indices: np.ndarray) -> bytes:
    """8-bit LZW codes that add no strings: a clear code often enough that every code stays 9 bits wide."""
    clear, end, run = 256, 257, 250
    codes_ = [c for i, v in enumerate(indices.ravel().tolist()) for c in ((clear, v) if i % run == 0 else (v,))]
    bits = nbits = 0
    out = bytearray()
    for code in [*codes_, end]:
        bits |= code << nbits
        nbits += 9
        while nbits >= 8:
            out.append(bits & 255)
            bits >>= 8
            nbits -= 8
    return bytes(out + (bytes([bits]) if nbits else b""))


def gif(pixels: np.ndarray, table_bits: int, transparent: int | None = None) -> bytes:
    """A GIF89a of the (H, W) ``pixels`` with a global colour table of 2**``table_bits`` entries, LZW minimum
    code size 8 (so indices up to 255 can be coded whatever the table holds)."""
    height, width = pixels.shape
    table = b"".join(bytes([i * 40 % 256, i * 90 % 256, 255 - i]) for i in range(1 << table_bits))
    head = b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80 | (table_bits - 1), 0, 0) + table
    if transparent is not None:
        head += b"\x21\xf9\x04\x01\x00\x00" + bytes([transparent]) + b"\x00"
    data = _lzw_9bit(pixels)
    blocks = b"".join(bytes([len(data[i : i + 255])]) + data[i : i + 255] for i in range(0, len(data), 255))
    return head + b"," + struct.pack("<HHHHB", 0, 0, width, height, 0) + b"\x08" + blocks + b"\x00;"


def stripes(colours: int, h: int = 40, w: int = 40) -> np.ndarray:
    return (np.arange(h * w).reshape(h, w) % colours).astype(np.uint8)


def test_a_bmp_index_beyond_its_palette_is_damaged_data() -> None:
    """Pillow paints the pixel black without a word; ImageMagick refuses the file ('invalid colormap index')."""
    pixels = stripes(16)
    assert inspect_image(bmp8(pixels, 16), "ok.bmp").damage == []
    pixels[5, 7] = pixels[30, 2] = 200
    v = inspect_image(bmp8(pixels, 16), "bad.bmp")
    assert v.usable and v.damage == [
        "palette index 200 beyond the 16-entry palette (row 5, column 7; 2 pixels out of range)"
    ], v


def test_a_gif_index_beyond_its_colour_table_is_damaged_data() -> None:
    pixels = stripes(4)
    assert inspect_image(gif(pixels, 2), "ok.gif").damage == []
    pixels[3, 9] = 17
    v = inspect_image(gif(pixels, 2), "bad.gif")
    assert v.usable and v.damage == [
        "palette index 17 beyond the 4-entry palette (row 3, column 9; 1 pixel out of range)"
    ], v


def test_a_gifs_transparent_index_needs_no_palette_entry() -> None:
    """Encoders set the transparent index beyond a short table; Pillow fills the canvas with it too."""
    pixels = stripes(4)
    pixels[:5] = 255
    v = inspect_image(gif(pixels, 2, transparent=255), "t.gif")
    assert (v.error, v.damage) == (None, []), v


@pytest.mark.parametrize("fmt", ["BMP", "GIF"])
@pytest.mark.parametrize("colours", [2, 5, 16, 200])
def test_pillow_palette_images_with_few_colours_stay_clean(rng: np.random.Generator, fmt: str, colours: int) -> None:
    im = Image.fromarray(rng.integers(0, colours, (40, 48), dtype=np.uint8), "P")
    im.putpalette(bytes(rng.integers(0, 256, 3 * colours, dtype=np.uint8)))
    v = inspect_image(encode(im, fmt), f"p.{fmt.lower()}")
    assert (v.error, v.damage) == (None, []), v


def test_a_folder_scan_reports_the_palette_damage_at_the_file(tmp_path: Path, write: Write) -> None:
    pixels = stripes(16)
    write("a/ok.bmp", bmp8(pixels, 16))
    pixels[0, 0] = 99
    write("b/bad.bmp", bmp8(pixels, 16))
    report = scan_dir(tmp_path)
    assert codes(report) == {"I004"}, codes(report)
    (location,) = finding(report, "I004").locations
    assert (location.path, location.detail) == (
        "b/bad.bmp",
        "palette index 99 beyond the 16-entry palette (row 0, column 0; 1 pixel out of range) [Pillow "
        + Image.__version__
        + "]",
    )


# -- PackBits strips that unpack to another size than their rows -----------------------------------------


def packbits(raw: bytes) -> bytes:
    """PackBits of ``raw`` as literal runs of up to 128 bytes."""
    return b"".join(bytes([len(raw[i : i + 128]) - 1]) + raw[i : i + 128] for i in range(0, len(raw), 128))


def packbits_tiff(strips: list[bytes], width: int, height: int, rows_per_strip: int) -> bytes:
    """A little-endian 8-bit grayscale TIFF of PackBits ``strips`` (already packed)."""
    body = b"".join(strips)
    offsets, at = [], 8
    for strip in strips:
        offsets.append(at)
        at += len(strip)
    extra = 8 + len(body) + (len(body) & 1)  # the arrays of offsets and counts, after the pixels
    n = len(strips)
    arrays = struct.pack(f"<{n}I", *offsets) + struct.pack(f"<{n}I", *map(len, strips))
    ifd_at = extra + len(arrays)

    def long_or_array(tag: int, where: int, value: int) -> bytes:
        return struct.pack("<HHII", tag, 4, n, value if n == 1 else where)

    entries = [
        struct.pack("<HHIHH", 256, 3, 1, width, 0),
        struct.pack("<HHIHH", 257, 3, 1, height, 0),
        struct.pack("<HHIHH", 258, 3, 1, 8, 0),
        struct.pack("<HHIHH", 259, 3, 1, 32773, 0),
        struct.pack("<HHIHH", 262, 3, 1, 1, 0),
        long_or_array(273, extra, offsets[0]),
        struct.pack("<HHIHH", 277, 3, 1, 1, 0),
        struct.pack("<HHIHH", 278, 3, 1, rows_per_strip, 0),
        long_or_array(279, extra + 4 * n, len(strips[0])),
    ]
    ifd = struct.pack("<H", len(entries)) + b"".join(entries) + bytes(4)
    return b"II*\x00" + struct.pack("<I", ifd_at) + body + bytes(len(body) & 1) + arrays + ifd


def gray(rng: np.random.Generator, n: int) -> bytes:
    return rng.integers(0, 256, n, dtype=np.uint8).tobytes()


def test_a_packbits_strip_with_more_data_than_its_rows_is_damaged_data(rng: np.random.Generator) -> None:
    """libtiff stops unpacking when the rows are filled and drops the rest: a run header overwritten into a
    longer run shifts every byte after it, silently."""
    pixels = gray(rng, 40 * 30)
    assert inspect_image(packbits_tiff([packbits(pixels)], 40, 30, 30), "ok.tif").damage == []
    v = inspect_image(packbits_tiff([packbits(pixels + gray(rng, 100))], 40, 30, 30), "long.tif")
    assert v.usable and v.damage == [
        "strip 0: PackBits data unpacks to 1,300 bytes, not the 1,200 of its 30 rows (libtiff drops the surplus:"
        " a damaged run header shifts every byte after it)"
    ], v


def test_an_overwritten_run_header_is_found(rng: np.random.Generator) -> None:
    """A repeat run (two bytes: 1 - n, the value) whose header grows repeats its byte more often: every row after
    it shifts, and libtiff drops what overflows the strip."""
    pixels = bytes(np.repeat(rng.integers(0, 256, 40, dtype=np.uint8), 30))  # runs of 30 equal bytes
    packed = b"".join(bytes([257 - 30, pixels[i]]) for i in range(0, len(pixels), 30))
    good = packbits_tiff([packed], 40, 30, 30)
    assert inspect_image(good, "ok.tif").damage == []
    damaged = packed[:20] + b"\x81" + packed[21:]  # the 11th run of 30 becomes a run of 128
    v = inspect_image(packbits_tiff([damaged], 40, 30, 30), "bad.tif")
    assert v.usable and v.damage == [
        "strip 0: PackBits data unpacks to 1,298 bytes, not the 1,200 of its 30 rows (libtiff drops the surplus:"
        " a damaged run header shifts every byte after it)"
    ], v


def test_a_last_strip_written_with_all_its_rows_is_no_damage(rng: np.random.Generator) -> None:
    """Rows 16-39 in strips of 16: the last strip holds 8 rows, and a writer may pack all 16 (padding)."""
    pixels = gray(rng, 40 * 40)
    strips = [packbits(pixels[i * 640 : (i + 1) * 640]) for i in range(2)]
    exact = packbits_tiff([*strips, packbits(pixels[1280:])], 40, 40, 16)
    padded = packbits_tiff([*strips, packbits(pixels[1280:] + bytes(320))], 40, 40, 16)
    for data in (exact, padded):
        v = inspect_image(data, "ok.tif")
        assert (v.error, v.damage) == (None, []), v
    v = inspect_image(packbits_tiff([*strips, packbits(pixels[1280:] + bytes(100))], 40, 40, 16), "odd.tif")
    assert v.damage == [
        "strip 2: PackBits data unpacks to 420 bytes, not the 320 of its 8 rows (libtiff drops the surplus: a"
        " damaged run header shifts every byte after it)"
    ], v


@pytest.mark.parametrize("mode", ["1", "L", "RGB", "RGBA", "CMYK", "I;16", "P"])
def test_pillow_packbits_tiffs_stay_clean(rng: np.random.Generator, mode: str) -> None:
    rgb = Image.fromarray(natural(rng, 101, 77))
    im = rgb.convert(mode) if mode != "I;16" else Image.fromarray(natural(rng, 101, 77)[..., 0].astype(np.uint16) * 257)
    frames = [im, im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    data = encode(frames[0], "TIFF", compression="packbits", save_all=True, append_images=frames[1:])
    v = inspect_image(data, "ok.tif")
    assert (v.error, v.damage, v.frames) == (None, [], 2), v


def test_packbits_damage_on_a_later_page_names_the_page(rng: np.random.Generator) -> None:
    """Page 1 is one gray value: libtiff packs each row of 40 as one repeat run, (-39, 77)."""
    first, second = Image.fromarray(natural(rng, 30, 40)[..., 0]), Image.new("L", (40, 30), 77)
    data = encode(first, "TIFF", compression="packbits", save_all=True, append_images=[second])
    with Image.open(io.BytesIO(data)) as im:
        im.seek(1)
        start = im.tag_v2[273][0]
    assert data[start : start + 4] == bytes([257 - 40, 77, 257 - 40, 77])
    v = inspect_image(data[:start] + b"\x81" + data[start + 1 :], "two.tif")  # the first row's run: 128 bytes
    assert v.usable and v.damage == [
        "page 1, strip 0: PackBits data unpacks to 1,288 bytes, not the 1,200 of its 30 rows (libtiff drops the"
        " surplus: a damaged run header shifts every byte after it)"
    ], v


# -- a palette image of one colour held by several palette entries ---------------------------------------


def _two_entry_image(fmt: str, second: tuple[int, int, int], transparent: int | None = None) -> bytes:
    """Left half palette index 0, right half index 1; entry 0 is (10, 20, 30), entry 1 ``second``."""
    indices = np.zeros((48, 64), np.uint8)
    indices[:, 32:] = 1
    im = Image.fromarray(indices, "P")
    im.putpalette([10, 20, 30, *second] + [0] * 762)
    extra = {} if transparent is None else {"transparency": transparent}
    return encode(im, fmt, **extra)


@pytest.mark.parametrize("fmt", ["PNG", "GIF"])
def test_a_palette_image_of_one_colour_in_two_entries_is_a_constant_image(fmt: str) -> None:
    """Its indices differ, but every loader converts it to RGB: one colour, which standardisation divides by
    zero; only the indices were looked at."""
    same = inspect_image(_two_entry_image(fmt, (10, 20, 30)), f"a.{fmt.lower()}")
    assert same.error is None and same.constant == "(10, 20, 30) (palette indices 0, 1, one colour)"
    assert inspect_image(_two_entry_image(fmt, (10, 20, 31)), "b").constant is None
    seen_through = inspect_image(_two_entry_image(fmt, (10, 20, 30), transparent=1), "c")
    assert seen_through.constant is None  # one half transparent: two colours once alpha is kept


def test_indices_beyond_a_short_palette_are_searched_in_bounded_memory() -> None:
    """A 1-bit palette PNG of 6,000² whose every pixel is index 1 of a 1-entry palette: the search unpacked
    every row at once and listed every out-of-range pixel as an 8-byte position (1.6 GB for a crafted
    13,000² file of 37 KB). Now a block of rows at a time."""
    import struct
    import zlib

    side = 6000
    rows = (b"\0" + b"\xff" * (side // 8)) * side
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 3, 0, 0, 0)
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"PLTE", bytes(3))
        + chunk(b"IDAT", zlib.compress(rows, 6))
        + chunk(b"IEND", b"")
    )
    del rows
    verdict, peak = inspected_with_peak(data, "short.png")
    assert verdict.damage == [
        "IDAT: palette index 1 beyond the 1-entry palette (row 0, column 0; 36,000,000 pixels out of range)"
    ]
    assert peak < 64 << 20, f"{peak:,} bytes traced"  # the inflated rows (4.5 MB) and blocks, not 36M positions


def test_text_chunks_past_pillows_limit_on_all_text_are_not_inflated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the text read passes Pillow's limit on all text, Pillow refuses the file: the text chunks after
    that point were still inflated, each to its own limit (2,000 small zlib bombs took seconds a file)."""
    import zlib

    from scanner_service.imaging import png as png_judge

    inflated: list[str] = []
    real = png_judge._Ancillary._inflate

    def counting(self: object, name: str, stream: memoryview) -> bytes | None:
        inflated.append(name)
        return real(self, name, stream)  # type: ignore[arg-type]

    monkeypatch.setattr(png_judge._Ancillary, "_inflate", counting)
    text = chunk(b"zTXt", b"Comment\0\0" + zlib.compress(b"a" * 1_000_000, 9))
    base = encode(Image.fromarray(natural(np.random.default_rng(0), 16, 16)), "PNG")
    at = base.index(b"IDAT") - 4
    data = base[:at] + text * 100 + base[at:]
    verdict = inspect_image(data, "chatty.png")
    assert verdict.error is not None and "more than Pillow's limit" in verdict.error
    assert len(inflated) < 70  # 68 chunks of 1,000,000 characters pass 64 MiB
