"""inspect_image on real files: valid ones of every kind pass, each kind of damage gets its verdict."""

from __future__ import annotations

import io
import shutil
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from imagetools import chunk, encode, inspected_with_peak, jpeg, natural, png, png_bytes, zero_block
from PIL import Image

from scanner_service.imaging import decoder_entry, inspect_image, judge_label
from scanner_service.imaging import png as png_module
from scanner_service.imaging.jpeg import end_of_image, parse_header
from scanner_service.imaging.sniff import certainly_no_image

# -- the PNG encoder of these tests is itself checked against Pillow ------------------------------------

PNG_CASES = [
    (colour, depth, interlace)
    for colour, depths in ((0, (1, 2, 4, 8, 16)), (2, (8, 16)), (3, (1, 2, 4, 8)), (4, (8, 16)), (6, (8, 16)))
    for depth in depths
    for interlace in (False, True)
]


def _png_case(rng: np.random.Generator, colour: int, depth: int, interlace: bool, h: int = 13, w: int = 11) -> bytes:
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    top = (1 << depth) - 1
    pixels = rng.integers(0, top + 1, (h, w, channels), dtype=np.uint32).astype(np.uint16 if depth == 16 else np.uint8)
    palette = bytes(rng.integers(0, 256, 3 << depth, dtype=np.uint8)) if colour == 3 else None
    return png_bytes(pixels, colour, depth, interlace, palette=palette)


@pytest.mark.parametrize(("colour", "depth", "interlace"), PNG_CASES, ids=lambda v: str(v))
def test_every_valid_png_layout_passes(rng: np.random.Generator, colour: int, depth: int, interlace: bool) -> None:
    data = _png_case(rng, colour, depth, interlace)
    with Image.open(io.BytesIO(data)) as im:  # the reference decoder accepts what the encoder wrote
        im.load()
        assert im.size == (11, 13)
    v = inspect_image(data, "x.png")
    assert v.error is None and v.damage == [] and v.bomb is None
    assert (v.width, v.height, v.format) == (11, 13, "png")
    assert (v.unusual is not None) == (depth == 16 or colour == 4)


def test_png_damage_gets_the_decoder_reason(rng: np.random.Generator) -> None:
    good = png_bytes(natural(rng, 40, 30), 2, 8, interlace=True)
    ihdr_end = 8 + 25
    idat = good.index(b"IDAT") - 4
    length = int.from_bytes(good[idat : idat + 4], "big")
    body = bytearray(good[idat + 8 : idat + 8 + length])
    body[40:60] = bytes(range(20))
    bad_zlib = good[:idat] + chunk(b"IDAT", bytes(body)) + good[idat + 12 + length :]
    flipped = bytearray(good)
    flipped[idat + 20] ^= 0x01
    bad_ihdr = good[:8] + chunk(b"IHDR", good[16:24] + bytes([3, 2, 0, 0, 0])) + good[ihdr_end:]
    cases = {
        "bad IDAT CRC": (bytes(flipped), "bad CRC in the IDAT chunk"),
        "valid CRC, damaged zlib data": (bad_zlib, "IDAT"),
        "no IEND": (good[:-12], "no IEND"),
        "cut in IDAT": (good[: idat + 30], "truncated"),
        "bit depth 3": (bad_ihdr, "bit depth 3 is invalid"),
        "filter type 7": (png_bytes(natural(rng, 8, 8), 2, 8, filter_type=7), "invalid filter type 7"),
        "no PLTE": (png_bytes(np.zeros((4, 4), np.uint8), 3, 8), "without a PLTE"),
        "bad tEXt CRC": (
            good[:ihdr_end] + chunk(b"tEXt", b"a\x00b")[:-1] + b"\x00" + good[ihdr_end:],
            "tEXt",
        ),
    }
    for name, (data, reason) in cases.items():
        v = inspect_image(data, "x.png")
        assert v.error is not None and reason in v.error, (name, v.error)


def test_png_short_rows_and_extra_data() -> None:
    pixels = np.arange(64, dtype=np.uint8).reshape(8, 8)
    raw = b"".join(b"\x00" + bytes(r) for r in pixels)
    header = chunk(b"IHDR", (8).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0]))

    def make(stream: bytes) -> bytes:
        return b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", stream) + chunk(b"IEND", b"")

    short = inspect_image(make(zlib.compress(raw[:-9])), "s.png")
    assert short.error is not None and "after 63 of 72 bytes" in short.error
    extra = inspect_image(make(zlib.compress(raw + b"\x00" * 9)), "e.png")
    assert extra.error is None and extra.damage == ["IDAT: more image data than the header declares"]
    stream = zlib.compress(raw)
    clean = inspect_image(make(stream), "c.png")
    assert clean.error is None and clean.damage == []
    trailing = inspect_image(make(stream + b"junk"), "t.png")  # inflates fine: the checksum is not at the end
    assert trailing.error is None and trailing.damage == ["IDAT: 4 bytes after the end of the zlib stream"]
    open_ended = inspect_image(make(stream[:-4]), "u.png")
    assert open_ended.error is None
    assert open_ended.damage == ["IDAT: the zlib stream is not terminated (no checksum)"]


def test_png_zlib_window_above_32k_is_an_error() -> None:
    """A zlib header whose window size field is above 7 (more than 32 KB): zlib, hence Pillow ("broken data
    stream") and libpng, refuse it; ISA-L inflates it anyway, so it is checked before inflating. Smaller
    windows are valid."""
    pixels = np.arange(64, dtype=np.uint8).reshape(8, 8)
    raw = b"".join(b"\x00" + bytes(r) for r in pixels)
    header = chunk(b"IHDR", (8).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0]))
    deflated = zlib.compress(raw)[2:]
    for cinfo in (0, 7, 8, 15):
        cmf = cinfo << 4 | 8
        flg = (31 - (cmf << 8) % 31) % 31
        data = b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", bytes([cmf, flg]) + deflated) + chunk(b"IEND", b"")
        v = inspect_image(data, "w.png")
        if cinfo <= 7:
            assert (v.error, v.damage) == (None, []), v
            continue
        assert v.error == "IDAT: invalid compressed data (the zlib header declares a window above 32 KB)", v
        with pytest.raises(OSError), Image.open(io.BytesIO(data)) as im:
            im.load()


def test_apng_every_frame_is_checked(rng: np.random.Generator) -> None:
    frames = [Image.fromarray(natural(rng, 24, 24)) for _ in range(3)]
    data = encode(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=50)
    v = inspect_image(data, "a.png")
    assert v.error is None and v.frames == 3
    # damage the compressed data of the last frame (fdAT), keeping its CRC valid
    at = data.rindex(b"fdAT") - 4
    length = int.from_bytes(data[at : at + 4], "big")
    body = bytearray(data[at + 8 : at + 8 + length])
    body[10:40] = bytes(30)
    broken = data[:at] + chunk(b"fdAT", bytes(body)) + data[at + 12 + length :]
    v = inspect_image(broken, "a.png")
    assert v.error is not None and v.error.startswith("APNG frame 2")


def test_jpeg_variants_pass(rng: np.random.Generator) -> None:
    variants = {
        "baseline": jpeg(rng),
        "progressive": jpeg(rng, progressive=True),
        "gray": jpeg(rng, mode="L"),
        "cmyk": jpeg(rng, mode="CMYK"),
        "4:4:4": jpeg(rng, subsampling=0),
        "4:2:2": jpeg(rng, subsampling=1),
        "restart markers": jpeg(rng, restart_marker_blocks=2),
        "odd size": jpeg(rng, h=37, w=53),
        "optimized": jpeg(rng, optimize=True),
    }
    for name, data in variants.items():
        v = inspect_image(data, "x.jpg")
        assert v.error is None and v.damage == [] and v.trailing == 0, (name, v)
        assert v.constant is None
    assert inspect_image(variants["cmyk"], "x.jpg").mode == "CMYK"
    assert inspect_image(variants["gray"], "x.jpg").gray is True


def test_jpeg_damage_error_or_warning(rng: np.random.Generator) -> None:
    good = jpeg(rng, 160, 200)
    dht = good.index(b"\xff\xc4") + 5
    truncated = inspect_image(good[: len(good) // 2], "t.jpg")
    assert truncated.error is not None and "no end-of-image marker" in truncated.error
    no_eoi = inspect_image(good[:-2], "t.jpg")
    assert no_eoi.error is not None and "truncated" in no_eoi.error
    huffman = inspect_image(good[:dht] + b"\xff" * 16 + good[dht + 16 :], "h.jpg")
    assert huffman.error is not None and "DHT" in huffman.error
    zeroed = inspect_image(zero_block(good), "z.jpg")  # Pillow decodes it silently: a warning
    assert zeroed.error is None and zeroed.damage and zeroed.damage[0].startswith("Corrupt JPEG data")
    header_only = inspect_image(good[:300], "h.jpg")
    assert header_only.error is not None


def test_jpeg_damage_pillow_fails_on_is_an_error(rng: np.random.Generator) -> None:
    """A stray marker in the scan: non-strict libjpeg steps over it, Pillow raises."""
    good = jpeg(rng, 160, 200)
    start = good.index(b"\xff\xda")
    at = start + 400
    v = inspect_image(good[:at] + b"\xff\x7d\x00\x00" + good[at + 4 :], "m.jpg")
    assert v.error is not None and "Pillow:" in v.error


def test_a_jpeg_cut_or_damaged_right_after_its_start_marker_is_a_corrupt_jpeg(rng: np.random.Generator) -> None:
    """A JPEG's first bytes are FF D8 FF: a download cut after 2 or 3 bytes, or a damaged third byte, was an
    'unknown binary data' or 'no start-of-image marker' before. libjpeg steps over the damaged byte, Pillow
    does not even identify the file: an error naming both."""
    good = jpeg(rng)
    for cut in (2, 3):
        v = inspect_image(good[:cut], "a.jpg")
        assert (v.format, v.error) == ("jpeg", "the file ends inside the header (no image data: truncated)"), v
    v = inspect_image(good[:2] + b"\x00" + good[3:], "a.jpg")
    assert v.format == "jpeg" and judge_label(v).startswith("libjpeg-turbo"), v
    assert v.error is not None and v.error.startswith("Corrupt JPEG data: 18 extraneous bytes before marker"), v
    assert v.error.endswith(" (Pillow: cannot identify the image)"), v.error  # (the JFIF segment skipped)
    assert inspect_image(b"\xff", "a.jpg").format is None  # one byte says nothing


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([0xFF, 0xD9, 0x00, 0x01]), max_size=40).map(bytes), st.data())
def test_end_of_image_is_just_past_the_first_end_marker(data: bytes, draw: st.DataObject) -> None:
    """The end-of-image search (its shortcut for a file that ends with the marker, and its marker walk
    otherwise) agrees with ``bytes.find`` at every start, on bytes and on memoryviews (LMDB values)."""
    start = draw.draw(st.integers(0, len(data) + 2))
    found = data.find(b"\xff\xd9", start) if start <= len(data) else -1
    expected = found + 2 if found >= 0 else -1
    assert end_of_image(data, start) == expected
    assert end_of_image(memoryview(data), start) == expected


def test_jpeg_header_damage_that_libjpeg_steps_over_is_damaged_data(rng: np.random.Generator) -> None:
    """Junk before a header segment, or a zeroed Huffman table marker (the table is skipped: Pillow decodes
    garbage silently): libjpeg warns "extraneous bytes before marker", which stops the TurboJPEG interface
    even when not strict. Still damaged data, never a clean verdict."""
    good = jpeg(rng, optimize=True)
    dht = good.index(b"\xff\xc4")
    zeroed = good[:dht] + bytes(8) + good[dht + 8 :]
    dqt = good.index(b"\xff\xdb")
    junk = good[:dqt] + b"garbage!" + good[dqt:]
    for data, marker in ((zeroed, "0xc4"), (junk, "0xdb")):
        v = inspect_image(data, "h.jpg")
        assert v.error is None and len(v.damage) == 1, (v.error, v.damage)
        assert (
            v.damage[0].startswith("Corrupt JPEG data:") and f"extraneous bytes before marker {marker}" in v.damage[0]
        )
    assert not inspect_image(good, "g.jpg").damage


def test_trailing_data_and_concatenation(rng: np.random.Generator) -> None:
    a = jpeg(rng)
    head = parse_header(a)
    assert end_of_image(a, head.scan) == len(a)
    glued = inspect_image(a + jpeg(rng), "g.jpg")
    assert glued.error is None and glued.trailing > 0 and "another JPEG" in glued.trailing_what
    payload = inspect_image(a + b"PK\x03\x04secret", "p.jpg")
    assert payload.trailing == 10
    p = png(rng)
    assert inspect_image(p + b"tail", "t.png").trailing == 4
    gif = encode(Image.fromarray(natural(rng, 16, 16)).convert("P"), "GIF")
    assert inspect_image(gif + b"xyz", "t.gif").trailing == 3
    webp = encode(Image.fromarray(natural(rng, 16, 16)), "WEBP")
    assert inspect_image(webp + b"xyz", "t.webp").trailing == 3


def test_multi_frame_formats_are_decoded_frame_by_frame(rng: np.random.Generator) -> None:
    frames = [Image.fromarray(natural(rng, 20, 20)).convert("P") for _ in range(4)]
    gif = encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    v = inspect_image(gif, "a.gif")
    assert v.error is None and v.frames == 4
    cut = inspect_image(gif[: len(gif) * 3 // 4], "a.gif")
    assert cut.error is not None or cut.damage
    _gif_frames_lost_silently_are_an_error(rng)
    pages = [Image.fromarray(natural(rng, 20, 20)) for _ in range(3)]
    tiff = encode(pages[0], "TIFF", save_all=True, append_images=pages[1:])
    v = inspect_image(tiff, "a.tif")
    assert v.error is None and v.frames == 3
    assert inspect_image(tiff[: len(tiff) - 600], "a.tif").error is not None


def _pillow_frames(data: bytes) -> int | None:
    """How many frames Pillow decodes from a GIF without raising (None: it raises)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            for i in range(im.n_frames):
                im.seek(i)
                im.load()
            return int(im.n_frames)
    except Exception:
        return None


def _gif_frames_lost_silently_are_an_error(rng: np.random.Generator) -> None:
    """A zeroed kilobyte inside frame 2 of 4: for some offsets Pillow stops there without an error (fewer
    frames, the rest lost); the GIF block walk finds the damage, so each of those is an error."""
    frames = [Image.fromarray(natural(rng, 64, 96)).convert("P") for _ in range(4)]
    gif = encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    silent = []
    for at in range(len(gif) // 4, len(gif) // 2, 61):
        damaged = gif[:at] + bytes(1024) + gif[at + 1024 :]
        lost = _pillow_frames(damaged)
        if lost is not None and lost < 4:
            silent.append(damaged)
    assert silent, "no offset where Pillow loses frames silently"
    for damaged in silent:
        v = inspect_image(damaged, "a.gif")
        assert v.error is not None and v.error.startswith("damaged GIF block structure"), v


def test_zero_bytes_between_gif_blocks_lose_no_frame(rng: np.random.Generator) -> None:
    """Stray zero bytes between a frame's end and the next block (an encoder's extra block terminators):
    Pillow (and ImageMagick) skip them and read every frame, so the file is damaged data, not an error that
    says the frames after them are lost; zeros that run to the end of the file are the missing trailer."""
    frames = [Image.fromarray(natural(rng, 40, 40)).convert("P") for _ in range(3)]
    gif = encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    at = gif.rindex(b"\x00\x21\xf9") + 1  # after the second frame's data, before the last frame's control block
    for count in (1, 3):
        padded = gif[:at] + bytes(count) + gif[at:]
        assert _pillow_frames(padded) == 3
        v = inspect_image(padded, "a.gif")
        assert v.error is None and v.frames == 3, v
        assert v.damage == [
            f"{count} zero byte{'s' if count > 1 else ''} between GIF blocks from byte {at:,}"
            " (Pillow skips them; giflib refuses the file)"
        ]
    v = inspect_image(gif[:-1] + bytes(5), "a.gif")
    assert v.error is None and v.frames == 3, v
    assert v.damage[-1].startswith("no GIF trailer")
    assert inspect_image(gif[:at] + b"\x07" + gif[at:], "a.gif").error is not None  # no zero: still lost


def test_damage_inside_a_jpeg_compressed_tiff_page_is_damaged_data(rng: np.random.Generator) -> None:
    """libtiff's JPEG codec only prints libjpeg's warnings and Pillow decodes on: each strip of a JPEG page
    is checked by strict libjpeg-turbo, after the page's JPEGTables; valid pages stay clean."""
    pages = [Image.fromarray(natural(rng, 96, 128)) for _ in range(2)]
    tiff = encode(pages[0], "TIFF", compression="jpeg", save_all=True, append_images=pages[1:])
    clean = inspect_image(tiff, "p.tif")
    assert (clean.error, clean.damage, clean.frames) == (None, [], 2)
    with Image.open(io.BytesIO(tiff)) as im:
        im.seek(1)
        start, size = im.tag_v2[273][0], im.tag_v2[279][0]  # page 1's first strip
    at = start + size // 2
    damaged = inspect_image(tiff[:at] + bytes(64) + tiff[at + 64 :], "p.tif")
    assert damaged.error is None and len(damaged.damage) == 1, damaged
    assert damaged.damage[0].startswith("page 1, strip 0: Corrupt JPEG data")


def test_other_formats_judged_by_pillow(rng: np.random.Generator) -> None:
    image = Image.fromarray(natural(rng, 24, 32))
    for fmt, name in (
        ("BMP", "a.bmp"),
        ("TIFF", "a.tif"),
        ("WEBP", "a.webp"),
        ("GIF", "a.gif"),
        ("PPM", "a.ppm"),
    ):
        data = encode(image if fmt != "GIF" else image.convert("P"), fmt)
        v = inspect_image(data, name)
        assert v.error is None and v.usable and v.judge == "pillow", (fmt, v)
        entry = decoder_entry(v)
        assert entry is not None and entry[1].startswith("Pillow ")
        assert inspect_image(data[: len(data) // 2], name).error is not None, fmt


def test_a_tiff_cut_before_its_directory_is_truncated_not_unidentified(rng: np.random.Generator) -> None:
    """libtiff writes a page's directory after its pixels: a TIFF cut short loses it, and Pillow only says it
    cannot identify the file. The report says it was cut, and where the directory should be."""
    data = encode(Image.fromarray(natural(rng, 24, 32)), "TIFF", compression="tiff_lzw")
    directory = int.from_bytes(data[4:8], "little")
    assert directory > len(data) // 2  # the premise: the directory comes after the pixels
    v = inspect_image(data[: len(data) // 2], "a.tif")
    assert v.error == (
        f"truncated: the TIFF's first image directory is at byte {directory:,}, beyond the end of the file "
        f"({len(data) // 2:,} bytes)"
    ), v.error


def test_a_file_pillow_cannot_identify_gets_the_reason_of_its_formats_reader(rng: np.random.Generator) -> None:
    """A GIF cut after its header, an AVIF cut short: Pillow's bare 'cannot identify image file' hides what
    its reader of the format said; the reason carries it."""
    gif = encode(Image.fromarray(natural(rng, 24, 32)).convert("P"), "GIF")
    v = inspect_image(gif[:13], "a.gif")
    assert v.error == "Pillow cannot identify the image (GIF: no more images in GIF file)", v.error
    avif = encode(Image.fromarray(natural(rng, 24, 32)), "AVIF")
    v = inspect_image(avif[:64], "a.avif")  # cut inside its boxes
    assert v.error is not None and v.error.startswith("Pillow cannot identify the image (AVIF: Failed to decode "), (
        v.error
    )
    assert v.damage == []  # the reader's words are the reason, not warnings about the file


def test_float_tiff_nan_and_inf_are_counted() -> None:
    arr = np.array([[1.0, np.nan, 2.0], [np.inf, -np.inf, 0.5]], np.float32)
    v = inspect_image(encode(Image.fromarray(arr), "TIFF"), "f.tif")
    assert (v.mode, v.nan, v.inf) == ("F", 1, 2)
    assert v.unusual is not None


def test_bombs_are_judged_from_the_header_only() -> None:
    header = chunk(b"IHDR", (50_000).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0]))
    png_bomb = b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", b"garbage") + chunk(b"IEND", b"")
    v = inspect_image(png_bomb, "b.png", max_pixels=10_000_000)
    assert v.bomb is not None and v.error is None and "2,500,000,000 pixels" in v.bomb
    small = encode(Image.new("RGB", (64, 64)), "JPEG")
    sof = small.index(b"\xff\xc0") + 5
    jpeg_bomb = small[:sof] + (60_000).to_bytes(2, "big") * 2 + small[sof + 4 :]
    v = inspect_image(jpeg_bomb, "b.jpg", max_pixels=1_000_000)
    assert v.bomb is not None and v.error is None
    assert inspect_image(small, "s.jpg", max_pixels=64 * 64).bomb is None
    # formats whose size Pillow checks on opening: the count declared, not "a nested image"
    bmp = bytearray(encode(Image.new("RGB", (64, 48)), "BMP"))
    bmp[18:26] = (60_000).to_bytes(4, "little") * 2
    v = inspect_image(bytes(bmp), "b.bmp", max_pixels=1_000_000)
    assert (v.bomb, v.error) == ("3,600,000,000 pixels declared (limit 1,000,000)", None)
    # TGA has no signature: a header Pillow reads but refuses for its size is a bomb, not "not an image"
    v = inspect_image(encode(Image.new("RGB", (64, 48)), "TGA"), "small.tga", max_pixels=1_000)
    assert (v.format, v.bomb) == ("tga", "3,072 pixels declared (limit 1,000)")


def test_constant_images(rng: np.random.Generator) -> None:
    assert inspect_image(encode(Image.new("RGB", (64, 48), (9, 8, 7)), "JPEG"), "c.jpg").constant is not None
    assert inspect_image(encode(Image.new("L", (64, 48), 0), "PNG"), "c.png").constant == "0"
    flat16 = png_bytes(np.full((20, 20), 40000, np.uint16), 0, 16)
    assert inspect_image(flat16, "c.png").constant == "40000"
    assert inspect_image(encode(Image.new("P", (30, 30), 3), "GIF"), "c.gif").constant is not None
    one_dot = np.zeros((64, 64, 3), np.uint8)
    one_dot[31, 40] = 255
    assert inspect_image(encode(Image.fromarray(one_dot), "PNG"), "d.png").constant is None
    assert inspect_image(encode(Image.fromarray(one_dot), "JPEG", quality=95), "d.jpg").constant is None


def test_exif_orientation(rng: np.random.Generator) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6
    image = Image.fromarray(natural(rng, 20, 30))
    for fmt, name in (("JPEG", "o.jpg"), ("PNG", "o.png"), ("WEBP", "o.webp")):
        assert inspect_image(encode(image, fmt, exif=exif), name).orientation == 6, fmt
    assert inspect_image(encode(image, "JPEG"), "n.jpg").orientation is None
    # Pillow's load() applies a TIFF's orientation itself (the pixels every loader gets are upright)
    tiff = encode(image, "TIFF", exif=exif)
    with Image.open(io.BytesIO(tiff)) as im:
        assert im.getexif().get(0x0112) == 6
        im.load()
        assert im.size == (image.height, image.width)
    assert inspect_image(tiff, "o.tif").orientation is None
    # an orientation stored as a LONG, not the standard SHORT: Pillow's exif_transpose applies it too
    import struct

    ifd = b"MM\x00*" + struct.pack(">IH", 8, 1) + struct.pack(">HHII", 0x0112, 4, 1, 6) + struct.pack(">I", 0)
    segment = b"Exif\x00\x00" + ifd
    plain = encode(image, "JPEG")
    long_typed = plain[:2] + b"\xff\xe1" + struct.pack(">H", len(segment) + 2) + segment + plain[2:]
    with Image.open(io.BytesIO(long_typed)) as im:
        assert im.getexif().get(0x0112) == 6
    assert inspect_image(long_typed, "l.jpg").orientation == 6


def test_non_images_are_described() -> None:
    assert inspect_image(b"", "e.jpg").empty
    cases = {
        b"<!DOCTYPE html><html><body>Forbidden</body></html>": "HTML",
        b"just some words\n": "text",
        bytes(2000): "zero bytes",
        b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ": "AppleDouble",
        b"PK\x03\x04" + bytes(40): "ZIP",
    }
    for data, word in cases.items():
        v = inspect_image(data, "x.jpg")
        assert v.format is None and word in v.content, (data[:10], v.content)


def test_content_called_certainly_no_image_is_no_format_pillow_reads(rng: np.random.Generator) -> None:
    """Content judged without asking Pillow must be no format Pillow writes (and so reads), weak ones too."""
    import gzip
    import zipfile

    Image.init()  # every plugin registered
    image = Image.fromarray(natural(rng, 20, 30))
    written = 0
    for fmt in sorted(set(Image.SAVE) & set(Image.OPEN)):
        out = io.BytesIO()
        try:
            image.convert("1" if fmt == "XBM" else "RGB").save(out, fmt)
        except Exception:  # formats that need other modes or external tools
            continue
        written += 1
        assert not certainly_no_image(out.getvalue()[:512]), fmt
    assert written >= 15
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.txt", "x")
    npy = io.BytesIO()
    np.save(npy, np.zeros(3))
    for data in (
        b"<!DOCTYPE html><html><body>Forbidden</body></html>",
        b'  {"error": "not found"}\n',
        archive.getvalue(),
        gzip.compress(b"x"),
        b"%PDF-1.7\n",
        npy.getvalue(),
    ):
        assert certainly_no_image(data[:512]), data[:12]
    binary_bracket = b"[\x00\x01\x02" + bytes(range(200)) + b","  # binary that starts like JSON by chance
    for data in (b"just some words\n", bytes(600), b"\x89HDF\r\n\x1a\n" + bytes(100), binary_bracket):
        assert not certainly_no_image(data[:512]), data[:12]


def _odd_sos(data: bytes) -> bytes:
    """Al=1 in a sequential JPEG's scan header: libjpeg warns 'Invalid SOS parameters' and ignores it."""
    sos = data.index(b"\xff\xda")
    end = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    return data[: end - 1] + b"\x01" + data[end:]


def _jfif2(data: bytes) -> bytes:
    """JFIF version 2.01: libjpeg warns 'unknown JFIF revision number' and decodes the file as usual."""
    assert data[6:11] == b"JFIF\x00"
    return data[:11] + b"\x02\x01" + data[13:]


@pytest.mark.parametrize("quirk", [_odd_sos, _jfif2], ids=["odd-sos", "jfif-2"])
def test_a_harmless_warning_does_not_hide_damage_further_on(rng: np.random.Generator, quirk: Any) -> None:
    """Strict decoding stops at the first warning: a harmless one must not end the inspection."""
    base = jpeg(rng, 240, 320)
    damaged = zero_block(base)
    assert inspect_image(damaged, "d.jpg").damage  # the damage alone is seen
    valid = inspect_image(quirk(base), "v.jpg")
    assert valid.error is None and valid.damage == [] and valid.usable
    hidden = inspect_image(quirk(damaged), "d.jpg")
    assert hidden.error is None and any("Corrupt JPEG data" in d for d in hidden.damage), hidden.damage
    cut = quirk(base)[: len(base) // 2]
    truncated = inspect_image(cut, "t.jpg")
    assert truncated.error is not None and "truncated" in truncated.error, truncated.error


def test_every_field_behind_a_harmless_warning_is_set(tmp_path: Path, rng: np.random.Generator) -> None:
    """Two JFIF segments of version 2.01, and a sequential JPEG of three scans whose second scan header has
    odd parameters: damage after them is still found."""
    base = jpeg(rng, 240, 320)
    app0 = b"\xff\xe0\x00\x10JFIF\x00\x02\x01\x00\x00\x01\x00\x01\x00\x00"
    two = _jfif2(base)[:20] + app0 + _jfif2(base)[20:]
    assert inspect_image(two, "t.jpg").damage == []
    assert any("Corrupt JPEG data" in d for d in inspect_image(zero_block(two), "t.jpg").damage)
    if shutil.which("jpegtran") is None:
        return
    (tmp_path / "b.jpg").write_bytes(base)
    (tmp_path / "scans").write_text("0;\n1;\n2;\n")  # one scan per component, sequential
    cmd = ["jpegtran", "-scans", str(tmp_path / "scans"), str(tmp_path / "b.jpg")]
    multi = subprocess.run(cmd, capture_output=True, check=True).stdout
    assert parse_header(multi).sof == 0xC0 and multi.count(b"\xff\xda") == 3  # sequential, three scans
    second = [i for i in range(len(multi)) if multi.startswith(b"\xff\xda", i)][1]
    length = int.from_bytes(multi[second + 2 : second + 4], "big")
    odd = multi[: second + 2 + length - 1] + b"\x01" + multi[second + 2 + length :]  # Al=1 in scan 2
    assert inspect_image(odd, "m.jpg").damage == []
    late = zero_block(odd, at=0.9)  # damage in the third scan
    assert any("Corrupt JPEG data" in d for d in inspect_image(late, "m.jpg").damage)


def test_unreadable_formats_are_errors_not_non_images() -> None:
    heic = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(100)
    v = inspect_image(heic, "x.heic")
    assert v.format == "heif" and v.error is not None and "HEIF" in v.error


def test_decoders_are_named_with_versions(rng: np.random.Generator) -> None:
    entry = decoder_entry(inspect_image(jpeg(rng), "a.jpg"))
    assert entry is not None and entry[0] == "decoder.jpeg"
    assert "libjpeg-turbo" in entry[1] and "simplejpeg" in entry[1]
    entry = decoder_entry(inspect_image(png(rng), "a.png"))
    assert entry is not None and entry[0] == "decoder.png" and "ISA-L" in entry[1]


@pytest.mark.skipif(shutil.which("cjpeg") is None, reason="needs cjpeg (libjpeg-turbo-progs) to write such JPEGs")
@pytest.mark.parametrize(
    ("options", "judge"),
    [
        (["-arithmetic"], "decoder.jpeg"),
        (["-arithmetic", "-progressive"], "decoder.jpeg"),
        (["-sample", "3x1"], "decoder.jpeg.fallback"),  # the TurboJPEG interface refuses this layout
        (["-sample", "4x2"], "decoder.jpeg.fallback"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_unusual_valid_jpegs_pass(tmp_path: Path, rng: np.random.Generator, options: list[str], judge: str) -> None:
    source = tmp_path / "src.ppm"
    Image.fromarray(natural(rng, 60, 80)).save(source)
    data = subprocess.run(["cjpeg", *options, str(source)], capture_output=True, check=True).stdout
    v = inspect_image(data, "u.jpg")
    assert v.error is None and v.damage == [], v
    entry = decoder_entry(v)
    assert entry is not None and entry[0] == judge
    if judge.endswith("fallback"):  # Pillow names the library's version, not libjpeg's API version (6.2)
        from PIL import features

        assert entry[1].endswith(f"(libjpeg-turbo {features.version('libjpeg_turbo')})"), entry[1]
    cut = inspect_image(data[: len(data) // 2], "u.jpg")
    assert cut.error is not None
    if judge.endswith("fallback"):  # Pillow's reason, credited to Pillow (it was credited to libjpeg-turbo)
        assert judge_label(cut).startswith("Pillow "), (cut.error, judge_label(cut))


def test_png_with_a_damaged_signature_is_a_corrupt_png() -> None:
    """The PNGSuite's xs*/xcr/xlf files: a PNG whose signature a transfer altered is a damaged PNG (an error
    that says what happened), not some unknown file."""
    pixels = np.arange(64, dtype=np.uint8).reshape(8, 8)
    good = png_bytes(pixels, 0, 8)
    cases = {
        "top bit cleared": (bytes([0x09]) + good[1:], "first byte lost its top bit"),
        "lowercase letter": (good[:3] + b"g" + good[4:], "bytes changed"),
        "P changed to Q (PngSuite xs2n0g01)": (good[:1] + b"Q" + good[2:], "bytes changed"),
        "CR added": (good[:4] + b"\r" + good[4:], "bytes inserted: line endings converted"),
        "CR LF to LF": (good[:4] + good[5:], "bytes dropped: line endings converted"),
    }
    for name, (data, reason) in cases.items():
        v = inspect_image(data, "x.png")
        assert v.format == "png" and v.error is not None, name
        assert v.error.startswith("damaged PNG signature") and reason in v.error, (name, v.error)
        assert judge_label(v) == "PNG structure check"  # no decoder was asked
    assert inspect_image(b"<html>PNG IHDR</html>" + good, "x.png").format is None  # not a PNG at all


def test_every_picture_of_an_mpo_file_is_checked(rng: np.random.Generator) -> None:
    """MPO (camera multi-picture JPEG): the pictures after the first are frames like a GIF's."""
    first = Image.fromarray(natural(rng, 240, 320))
    second = Image.fromarray(natural(rng, 240, 320))
    mpo = encode(first, "MPO", save_all=True, append_images=[second], quality=90)
    whole = inspect_image(mpo, "m.jpg")
    assert whole.error is None and whole.damage == [] and whole.trailing == 0
    start = mpo.rindex(b"\xff\xd8\xff")  # where the second picture starts
    cut = inspect_image(mpo[:-3000], "m.jpg")
    assert cut.error is not None and cut.error.startswith("picture 2 of the MPO file: truncated")
    extra = inspect_image(mpo + jpeg(rng), "m.jpg")  # a JPEG after the pictures the MP index declares
    assert extra.error is None and extra.trailing_what == "another JPEG image (concatenated files?)"
    third = Image.fromarray(natural(rng, 240, 320))
    three = encode(first, "MPO", save_all=True, append_images=[second, third], quality=90)
    starts = [i for i in range(len(three)) if three.startswith(b"\xff\xd8\xff", i)]
    middle = three[: starts[1] + 3000] + three[starts[2] :]  # picture 2 loses its end, picture 3 is intact
    assert inspect_image(middle, "m.jpg").error is not None
    with Image.open(io.BytesIO(middle)) as im, pytest.raises(OSError):
        im.seek(1)
        im.load()
    damaged = inspect_image(mpo[:start] + zero_block(mpo[start:]), "m.jpg")
    assert damaged.error is None and any(
        d.startswith("picture 2 of the MPO file: Corrupt JPEG data") for d in damaged.damage
    )
    junk = inspect_image(mpo + b"junk after the last picture", "m.jpg")
    assert junk.trailing == 27 and junk.trailing_what == "unknown data"


PILLOW_PROBE = """
import sys
from scanner_service.runner import scan
report = scan(sys.argv[1], workers=0)
print(report.summary.errors, report.summary.warnings, "PIL" in sys.modules)
"""


@pytest.mark.slow
def test_valid_jpegs_and_pngs_are_judged_without_importing_pillow(tmp_path: Path, rng: np.random.Generator) -> None:
    """Pillow is imported for the files it judges, not for naming the decoders of the others: a worker that
    meets only valid JPEGs and PNGs starts faster. A file for Pillow (a GIF) still brings it in."""
    import sys

    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.jpg").write_bytes(jpeg(rng))
        (folder / f"{i}.png").write_bytes(png(rng))
    probe = [sys.executable, "-c", PILLOW_PROBE, str(folder)]
    out = subprocess.run(probe, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0", "False"], out.stdout + out.stderr
    (folder / "3.gif").write_bytes(encode(Image.fromarray(natural(rng)).convert("P"), "GIF"))
    out = subprocess.run(probe, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0", "True"], out.stdout + out.stderr


def test_a_png_cut_inside_a_crc_says_what_the_chunk_needs(rng: np.random.Generator) -> None:
    """A chunk needs its data and a 4-byte CRC after its type: a file cut inside IEND's CRC was "the IEND chunk
    needs 0 bytes, 3 remain", which contradicts itself."""
    good = png_bytes(natural(rng, 16, 16), 2, 8)
    iend = len(good) - 12
    idat = good.index(b"IDAT") - 4
    length = int.from_bytes(good[idat : idat + 4], "big")
    cases = {
        1: (
            good[:-1],
            f"the IEND chunk at byte {iend:,} needs 4 bytes after its type (0 of data and a 4-byte CRC), 3 remain",
        ),
        4: (
            good[:-4],
            f"the IEND chunk at byte {iend:,} needs 4 bytes after its type (0 of data and a 4-byte CRC), 0 remain",
        ),
        "IDAT": (
            good[: idat + 8 + length + 2],
            f"the IDAT chunk at byte {idat:,} needs {length + 4:,} bytes after its type ({length:,} of data and a "
            f"4-byte CRC), {length + 2:,} remain",
        ),
    }
    for name, (data, reason) in cases.items():
        v = inspect_image(data, "x.png")
        assert v.error == f"truncated: {reason}", (name, v.error)


def test_a_gif_with_one_byte_of_its_signature_changed_is_a_corrupt_gif(rng: np.random.Generator) -> None:
    """Pillow identifies a GIF by its six first bytes exactly: 'GIF89q' was 'unknown binary data' (not an
    image), where it is a damaged GIF that a loader cannot open."""
    good = encode(Image.fromarray(natural(rng, 16, 16, 1)), "GIF")
    assert good[:6] == b"GIF89a" or good[:6] == b"GIF87a"
    for bad in (good[:5] + b"q" + good[6:], b"GJF" + good[3:]):
        v = inspect_image(bad, "x.gif")
        assert v.format == "gif" and v.error is not None, v
        assert v.error.startswith(f"damaged GIF signature ('{bad[:6].decode()}'; a GIF starts"), v.error
        assert v.error.endswith("(Pillow: cannot identify the image)"), v.error
    assert inspect_image(b"GIF8\x009" + good[6:], "x.gif").format is None  # two bytes changed: unknown data
    assert inspect_image(good, "x.gif").error is None


def test_a_view_of_the_bytes_gets_the_verdict_of_the_bytes(rng: np.random.Generator) -> None:
    """``inspect_image`` takes a memoryview as it takes bytes: a truncated JPEG without its end marker was
    handed to Pillow from a view (``bytes.find``, which a view lacks, raised in the JPEG judge)."""
    whole = jpeg(rng, 64, 80)
    for data in (whole, whole[: len(whole) - 40], whole + b"PK\x03\x04 appended", whole[:2] + b"\x00" + whole[3:]):
        assert inspect_image(memoryview(bytearray(data)), "a.jpg") == inspect_image(data, "a.jpg")
    cut = inspect_image(memoryview(whole[: len(whole) - 40]), "a.jpg")
    assert cut.judge == "jpeg" and cut.error is not None and cut.error.startswith("truncated: no end-of-image"), cut


def _png_of(
    rows: bytes, width: int, height: int, colour: int, depth: int, z: bytes | None = None, interlace: int = 0
) -> bytes:
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([depth, colour, 0, 0, interlace])
    body = zlib.compress(rows) if z is None else z
    parts = [body[i : i + 700] for i in range(0, len(body), 700)] or [b""]  # several IDAT chunks
    idat = b"".join(chunk(b"IDAT", p) for p in parts)
    plte = chunk(b"PLTE", bytes(range(256)) * 3) if colour == 3 and depth == 8 else b""  # a full palette
    plte = chunk(b"PLTE", bytes(range(48))) if colour == 3 and depth == 4 else plte  # 16 entries: all 4 bits index
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + plte + idat + chunk(b"IEND", b"")


def test_big_image_data_checked_in_pieces_gets_the_verdict_of_the_whole(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Image data above ``STREAM_BYTES`` is inflated and its filter types checked a piece at a time (a 20,000 x
    20,000 RGB image held 1.2 GB at once): every verdict is the one the whole data gets, for valid data and for
    each kind of damage, with pieces of one row, of a few rows and of the whole."""
    cases: dict[str, bytes] = {}
    for colour, depth, width, height, interlace in (
        (2, 8, 40, 30, 0),
        (0, 16, 33, 25, 0),
        (6, 8, 7, 50, 0),
        (2, 8, 40, 30, 1),
        (0, 1, 61, 23, 1),
        (3, 8, 30, 20, 0),
        (3, 4, 30, 20, 1),
    ):
        channels = {0: 1, 2: 3, 3: 1, 6: 4}[colour]
        runs = png_module._row_runs(width, height, channels * depth, interlace)
        rows = bytearray()
        for _at, size, stride, _row in runs:
            for _ in range(size // stride):
                rows += bytes([len(rows) % 5]) + rng.integers(0, 256, stride - 1, dtype=np.uint8).tobytes()
        z = zlib.compress(bytes(rows))
        bad = bytearray(rows)
        at, _size, stride, row = runs[-1]
        bad[at + stride] = 7  # in the second row of the last pass
        flipped = bytearray(z)
        flipped[len(z) // 2] ^= 0xFF
        args = (width, height, colour, depth)
        for name, data in {
            "valid": _png_of(bytes(rows), *args, interlace=interlace),
            "bad filter": _png_of(bytes(bad), *args, interlace=interlace),
            "a row too many": _png_of(bytes(rows) + bytes(stride), *args, interlace=interlace),
            "two rows short": _png_of(bytes(rows[: -2 * stride]), *args, interlace=interlace),
            "stream cut": _png_of(b"", *args, z=z[: len(z) // 2], interlace=interlace),
            "no checksum": _png_of(b"", *args, z=z[:-4], interlace=interlace),
            "bytes after the stream": _png_of(b"", *args, z=z + b"junk", interlace=interlace),
            "a chunk after the stream": _png_of(b"", *args, z=z + bytes(1500), interlace=interlace),
            "flipped byte": _png_of(b"", *args, z=bytes(flipped), interlace=interlace),
            "window": _png_of(b"", *args, z=bytes([0x88]) + z[1:], interlace=interlace),
        }.items():
            cases[f"{colour}/{depth}/{interlace} {name}"] = data
        assert inspect_image(cases[f"{colour}/{depth}/{interlace} bad filter"], "a.png").error == (
            f"IDAT: invalid filter type 7 in row {row + 1}"
        )
    whole = {name: inspect_image(data, "a.png") for name, data in cases.items()}
    for kind in ("2/8/0", "2/8/1", "3/8/0", "0/1/1"):
        assert whole[f"{kind} valid"].error is None and whole[f"{kind} valid"].damage == [], whole[f"{kind} valid"]
        assert whole[f"{kind} a row too many"].damage == ["IDAT: more image data than the header declares"]
        short = whole[f"{kind} two rows short"].error
        assert short is not None and "the zlib stream ends" in short, short
    for piece, fed in ((1, 7), (300, 50), (1_000, 1 << 20)):  # inflated and compressed bytes at a time
        monkeypatch.setattr(png_module, "STREAM_BYTES", piece)
        monkeypatch.setattr(png_module, "IN_BYTES", fed)
        for name, data in cases.items():
            assert inspect_image(data, "a.png") == whole[name], (piece, fed, name)


def test_big_image_data_is_not_held_whole(rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory of checking a big PNG's data is a piece of ``STREAM_BYTES``, not the whole inflated image."""
    pixels = rng.integers(0, 256, (1500, 2000, 3), dtype=np.uint8)  # 9 MB of data, noise: no constant check
    data = encode(Image.fromarray(pixels), "PNG", compress_level=1)
    monkeypatch.setattr(png_module, "STREAM_BYTES", 1 << 20)
    inspect_image(data, "a.png")  # (imports and caches first)
    verdict, peak = inspected_with_peak(data, "a.png")
    assert verdict.error is None and verdict.damage == [] and verdict.mode == "RGB", verdict
    assert peak < 3 << 20, peak  # (9 MB and more, whole)
