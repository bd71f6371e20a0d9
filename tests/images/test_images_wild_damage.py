"""Damage found in the wild that passed as something else: a BMP whose info header size is damaged (named
unknown data), a BMP whose pixel offset points into its headers, an icon cut short or damaged in an image
Pillow does not load, a GIF frame with an LZW code size of 0, a TIFF whose version bytes are swapped; and
what Pillow logs about a file it refuses, printed beside the report."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pytest
from imagetools import encode, natural
from PIL import Image

from scanner_service.imaging import inspect_image
from tests.conftest import quiet_scan


def bmp(rng: np.random.Generator) -> bytearray:
    return bytearray(encode(Image.fromarray(natural(rng, 40, 52)), "BMP"))


@pytest.mark.parametrize("name", ["photo.bmp", ""], ids=["named-bmp", "lmdb-value"])
def test_a_bmp_whose_info_header_size_is_damaged_is_a_corrupt_bmp(rng: np.random.Generator, name: str) -> None:
    """One damaged byte in the header size (40 -> 41): Pillow's BMP reader takes the file and names the damage;
    it was reported as not an image ('unknown binary data'). Without a name, the size the file header declares
    makes the claim."""
    data = bmp(rng)
    struct.pack_into("<I", data, 14, 41)
    v = inspect_image(bytes(data), name)
    assert v.format == "bmp" and v.content == "", v
    assert v.error is not None and "Unsupported BMP header type (41)" in v.error, v


def test_bm_without_a_claim_stays_what_it_looks_like() -> None:
    """'BM' is two bytes: text that starts with them, named as no BMP, is still text."""
    v = inspect_image(b"BMW and other cars: a list\n", "")
    assert v.format is None and v.content == "text", v


def test_a_bmp_pixel_offset_inside_its_headers_is_damaged_data(rng: np.random.Generator) -> None:
    """Pillow reads the pixels from wherever bfOffBits points, header bytes included, every row shifted, without
    a word (ImageMagick refuses: 'improper image header'). The valid file stays clean."""
    data = bmp(rng)
    assert inspect_image(bytes(data), "a.bmp").damage == []
    struct.pack_into("<I", data, 10, 20)
    v = inspect_image(bytes(data), "a.bmp")
    assert v.error is None and v.trailing == 0, v
    assert v.damage == [
        "the pixel data offset 20 points inside the headers, which end at byte 54 (Pillow reads header bytes as"
        " pixels: every row is shifted)"
    ]


def icon(rng: np.random.Generator) -> bytes:
    """Pillow's icon of three PNG images, the largest last in the file."""
    image = Image.fromarray(natural(rng, 64, 64, 3)).convert("RGBA")
    return encode(image, "ICO", sizes=[(16, 16), (32, 32), (64, 64)])


def entries(data: bytes) -> list[tuple[int, int, int]]:
    """(width, size, offset) of each entry of an icon's directory, in file order."""
    count = struct.unpack_from("<H", data, 4)[0]
    out = []
    for i in range(count):
        width, _h, _c, _r, _p, _b, size, offset = struct.unpack_from("<BBBBHHII", data, 6 + 16 * i)
        out.append((width, size, offset))
    return out


def test_a_valid_icon_is_clean(rng: np.random.Generator) -> None:
    v = inspect_image(icon(rng), "favicon.ico")
    assert v.usable and v.damage == [] and v.trailing == 0, v


@pytest.mark.parametrize("cut", [1, 7])
def test_an_icon_cut_short_is_truncated(rng: np.random.Generator, cut: int) -> None:
    """The last image lost its last bytes (a PNG's IEND): Pillow loads the largest image all the same."""
    data = icon(rng)
    v = inspect_image(data[:-cut], "favicon.ico")
    assert v.error is not None and v.error.startswith("truncated: icon image 0 (64×64) needs bytes "), v


def test_an_icon_whose_smaller_image_is_damaged_is_corrupt(rng: np.random.Generator) -> None:
    """A bad CRC inside the 16×16 PNG: Pillow loads only the 64×64 one, and checks no IDAT CRC anyway."""
    data = bytearray(icon(rng))
    _w, size, offset = next(e for e in entries(bytes(data)) if e[0] == 16)
    idat = data.index(b"IDAT", offset)
    data[idat + 10] ^= 0xFF
    assert idat + 10 < offset + size
    v = inspect_image(bytes(data), "favicon.ico")
    assert v.error is not None and v.error.startswith("icon image 2 (16×16), a PNG: bad CRC in the IDAT chunk"), v


def test_an_icon_whose_smaller_bmp_image_is_cut_short_is_corrupt(rng: np.random.Generator) -> None:
    """An icon of BMP (DIB) images whose directory places the last one beyond the end of the file."""
    dib = bytes(40 + 16 * 16 * 4 + 16 * 4)  # header (filled in below), 32-bit pixels, AND mask
    header = struct.pack("<IiiHHIIiiII", 40, 16, 32, 1, 32, 0, 0, 0, 0, 0, 0)
    dib = header + dib[40:]
    big = Image.fromarray(natural(rng, 32, 32, 3)).convert("RGBA")
    png = encode(big, "PNG")
    first = 6 + 2 * 16
    directory = struct.pack("<HHH", 0, 1, 2)
    directory += struct.pack("<BBBBHHII", 32, 32, 0, 0, 1, 32, len(png), first)
    directory += struct.pack("<BBBBHHII", 16, 16, 0, 0, 1, 32, len(dib), first + len(png))
    whole = directory + png + dib
    assert inspect_image(whole, "a.ico").error is None
    v = inspect_image(whole[:-100], "a.ico")
    assert v.error is not None and v.error.startswith("truncated: icon image 1 (16×16) needs bytes "), v


def gif(rng: np.random.Generator) -> tuple[bytes, int]:
    """A GIF, and the offset of its first image's LZW minimum code size."""
    data = encode(Image.fromarray(natural(rng, 40, 52)).convert("P"), "GIF")
    packed = data[10]
    pos = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    while data[pos] == 0x21:  # extensions: their sub-blocks
        pos += 2
        while data[pos]:
            pos += 1 + data[pos]
        pos += 1
    assert data[pos] == 0x2C
    local = data[pos + 9]
    return data, pos + 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0)


def test_a_gif_frame_whose_lzw_code_size_is_0_is_corrupt(rng: np.random.Generator) -> None:
    """Pillow decodes such a frame without an error into a blank one (every pixel index 0: a constant image was
    all the report said); gifsicle and ImageMagick refuse the file."""
    data, at = gif(rng)
    assert inspect_image(data, "a.gif").error is None
    damaged = data[:at] + b"\x00" + data[at + 1 :]
    with Image.open(io.BytesIO(damaged)) as im:
        assert im.getextrema() == (0, 0)
    v = inspect_image(damaged, "a.gif")
    assert v.error is not None and "declares an LZW minimum code size of 0" in v.error, v


def big_endian_tiff(pixels: np.ndarray) -> bytes:
    """A big-endian grayscale TIFF of ``pixels`` (H, W ≤ 128), PackBits-compressed (libtiff decodes it: Pillow
    decodes only uncompressed pages itself), each row one literal run. Pillow writes little-endian files."""
    h, w = pixels.shape
    strip = b"".join(bytes([w - 1]) + row.astype(np.uint8).tobytes() for row in pixels)
    tags = [(256, w), (257, h), (258, 8), (259, 32773), (262, 1), (273, 8), (278, h), (279, len(strip))]
    ifd = struct.pack(">H", len(tags)) + b"".join(struct.pack(">HHII", tag, 4, 1, value) for tag, value in tags)
    return b"MM\x00*" + struct.pack(">I", 8 + len(strip)) + strip + ifd + bytes(4)


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_tiff_with_swapped_version_bytes_gets_libtiffs_reason_and_prints_nothing(
    rng: np.random.Generator, capfd: pytest.CaptureFixture[str], order: str
) -> None:
    """Pillow's TIFF reader takes these two headers too (II 00 2A, MM 2A 00); libtiff refuses them, and its
    message went to the terminal, in the middle of the report, while the finding said only 'decoder error -2'."""
    pixels = natural(rng, 40, 52, 1)
    if order == "<":
        data = encode(Image.fromarray(pixels), "TIFF", compression="tiff_lzw")
        swapped = b"II\x00*" + data[4:]
    else:
        data = big_endian_tiff(pixels)
        swapped = b"MM*\x00" + data[4:]
    assert inspect_image(data, "a.tif").usable
    v = inspect_image(swapped, "a.tif")
    assert v.error is not None and "libtiff: Not a TIFF file, bad version number" in v.error, v
    assert capfd.readouterr().err == ""


def test_padding_after_the_png_of_an_icon_is_no_damage(rng: np.random.Generator) -> None:
    """A directory size a few bytes longer than the PNG it holds (a writer's padding) is no damage."""
    data = bytearray(icon(rng))
    index = next(i for i, e in enumerate(entries(bytes(data))) if e[2] + e[1] == len(data))
    struct.pack_into("<I", data, 6 + 16 * index + 8, entries(bytes(data))[index][1] + 4)
    v = inspect_image(bytes(data) + bytes(4), "favicon.ico")
    assert v.usable and v.damage == [] and v.trailing == 0, v


def test_what_pillow_logs_about_a_file_it_refuses_does_not_reach_the_terminal(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """A TIFF directory declaring 43,779 samples per pixel: Pillow logs 'More samples per pixel than can be
    decoded' before it raises, and with no logging configured Python printed it to standard error, four times
    (once per attempt to open the file). The reason is in the finding."""
    data = bytearray(encode(Image.fromarray(natural(rng, 40, 52)), "TIFF", compression="tiff_lzw"))
    ifd = struct.unpack_from("<I", data, 4)[0]
    for i in range(struct.unpack_from("<H", data, ifd)[0]):
        at = ifd + 2 + 12 * i
        if struct.unpack_from("<H", data, at)[0] == 277:  # SamplesPerPixel
            struct.pack_into("<H", data, at + 8, 43779)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.tif").write_bytes(bytes(data))
    status, report = quiet_scan(tmp_path / "data", "-j", "1")
    assert status == 1
    found = [(f["name"], at["detail"]) for f in report["findings"] for at in f["locations"]]
    assert len(found) == 1 and found[0][0] == "corrupt-image", found
    assert "Invalid value for samples per pixel" in found[0][1], found
