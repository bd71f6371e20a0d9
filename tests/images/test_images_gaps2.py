"""Gaps a second probe found: no trailing data measured after a BMP; damaged RLE8/RLE4 data that Pillow decodes
silently; a list with classic Mac OS line endings read as one missing file; one file listed twice reported as
two identical copies."""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import encode, natural, png_bytes, scan_dir
from PIL import Image

from scanner_service import Report
from scanner_service.imaging import inspect_image

Write = Callable[[str, bytes], Path]


def loads(data: bytes) -> Image.Image:
    """Pillow (the loader) decodes the file without an error."""
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def details(report: Report, code: str) -> list[tuple[str, str]]:
    """(short location, detail) of each location of the finding ``code``."""
    for f in report.findings:
        if f.code == code:
            return [(loc.short(), loc.detail or "") for loc in f.locations]
    return []


# -- BMP builders ---------------------------------------------------------------------------------------------


def _rle_row(row: np.ndarray, rle4: bool) -> bytes:
    """One row as RLE codes (no end of line): runs of equal pixels, else stretches stored as they are."""
    out = bytearray()
    i, w = 0, len(row)
    while i < w:
        j = i
        while j < w and j - i < 255 and row[j] == row[i]:
            j += 1
        if j - i >= 2 or w - i < 3:
            count = j - i
            out += bytes([count, (row[i] << 4 | row[i]) if rle4 else row[i]])
            i = j
            continue
        k = i  # a stretch without two equal neighbours, at least 3 long
        while k < w and k - i < 254 and (k + 1 >= w or row[k + 1] != row[k]):
            k += 1
        k = max(k, i + 3) if w - i >= 3 else w
        lit = row[i:k]
        if rle4:
            nib = np.concatenate([lit, np.zeros(len(lit) % 2, np.uint8)])
            body = bytes((nib[0::2] << 4 | nib[1::2]).astype(np.uint8))
        else:
            body = bytes(lit.astype(np.uint8))
        out += bytes([0, len(lit)]) + body + b"\x00" * (len(body) % 2)
        i = k
    return bytes(out)


def rle_stream(pixels: np.ndarray, rle4: bool = False) -> bytes:
    """RLE8 (or RLE4) codes of palette indices (H, W), bottom row first, each row ended, then end of bitmap."""
    return b"".join(_rle_row(row, rle4) + b"\x00\x00" for row in pixels[::-1]) + b"\x00\x01"


def bmp_with(stream: bytes, width: int, height: int, rle4: bool = False, colours: int = 16) -> bytes:
    """A BMP (40-byte info header) of RLE ``stream`` with a palette of ``colours`` gray-blue entries."""
    palette = b"".join(bytes([i * 7 % 256, i * 13 % 256, 255 - i, 0]) for i in range(colours))
    offset = 14 + 40 + len(palette)
    info = (
        (40).to_bytes(4, "little")
        + width.to_bytes(4, "little")
        + height.to_bytes(4, "little")
        + (1).to_bytes(2, "little")
        + (4 if rle4 else 8).to_bytes(2, "little")
        + (2 if rle4 else 1).to_bytes(4, "little")
        + len(stream).to_bytes(4, "little")
        + bytes(8)
        + colours.to_bytes(4, "little")
        + bytes(4)
    )
    head = b"BM" + (offset + len(stream)).to_bytes(4, "little") + bytes(4) + offset.to_bytes(4, "little")
    return head + info + palette + stream


def indices(rng: np.random.Generator, h: int = 12, w: int = 21, colours: int = 16) -> np.ndarray:
    """Palette indices with runs and noisy stretches (both RLE modes in the stream)."""
    arr = np.repeat(rng.integers(0, colours, (h, (w + 3) // 4)), 4, axis=1)[:, :w]
    noise = rng.random((h, w)) < 0.3
    arr[noise] = rng.integers(0, colours, int(noise.sum()))
    return arr.astype(np.uint8)


def pillow_bmps(rng: np.random.Generator) -> dict[str, bytes]:
    """BMPs as Pillow writes them, in every mode it writes (1, L, P, RGB, RGBA), at odd and even widths."""
    out = {}
    for w, h in ((13, 7), (16, 9), (1, 1), (33, 5)):
        rgb = Image.fromarray(natural(rng, h, w))
        for mode in ("1", "L", "P", "RGB", "RGBA"):
            im = rgb.quantize(16) if mode == "P" else rgb.convert(mode)
            out[f"pil_{mode}_{w}x{h}.bmp"] = encode(im, "BMP")
    return out


# -- 1. trailing data after a BMP -----------------------------------------------------------------------------


def test_bmps_pillow_writes_end_where_their_headers_say(rng: np.random.Generator) -> None:
    """No trailing data (and no damage) in any BMP Pillow writes; what is appended to one is trailing data."""
    appended = png_bytes(natural(rng, 8, 8), 2)
    for name, data in pillow_bmps(rng).items():
        v = inspect_image(data, name)
        assert (v.format, v.error, v.trailing, v.damage) == ("bmp", None, 0, []), name
        v = inspect_image(data + appended, name)
        assert (v.error, v.trailing, v.damage) == (None, len(appended), []), name


def test_data_after_a_bmp_is_trailing_data_named_by_what_it_is(rng: np.random.Generator) -> None:
    bmp = pillow_bmps(rng)["pil_RGB_13x7.bmp"]
    png = png_bytes(natural(rng, 8, 8), 2)
    zipped = b"PK\x03\x04" + bytes(range(60))
    for extra, what in (
        (png, "another PNG image (concatenated files?)"),
        (zipped, "a ZIP archive"),
        (bytes(64), "zero bytes (padding)"),
        (bytes(range(1, 200)), "unknown data"),
    ):
        v = inspect_image(bmp + extra, "x.bmp")
        assert v.error is None
        assert (v.trailing, v.trailing_what) == (len(extra), what)


def test_bmp_trailing_data_is_reported_by_a_scan(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    bmp = pillow_bmps(rng)["pil_P_16x9.bmp"]
    write("a/glued.bmp", bmp + bmp)
    write("a/clean.bmp", bmp)
    report = scan_dir(tmp_path)
    assert details(report, "I006") == [
        ("a/glued.bmp", f"{len(bmp):,} bytes after the end of the image: another BMP image (concatenated files?)")
    ]


def test_what_bmp_writers_declare_is_no_trailing_data(rng: np.random.Generator) -> None:
    """Padding the headers declare (bfSize, biSizeImage: Photoshop's 2 extra bytes), a few zero bytes of
    alignment, a wrong or zero bfSize, and a V5 header's ICC profile after the pixels."""
    bmp = pillow_bmps(rng)["pil_RGB_13x7.bmp"]
    size = len(bmp)
    declared = bmp[:2] + (size + 2).to_bytes(4, "little") + bmp[6:] + b"\x00\x00"
    image_size = bmp[:34] + (size - 54 + 6).to_bytes(4, "little") + bmp[38:] + bytes(6)
    aligned = bmp + b"\x00\x00\x00"
    zero_size = bmp[:2] + bytes(4) + bmp[6:]
    wrong_size = bmp[:2] + (12345).to_bytes(4, "little") + bmp[6:]
    for data in (declared, image_size, aligned, zero_size, wrong_size):
        v = inspect_image(data, "x.bmp")
        assert (v.error, v.trailing, v.damage) == (None, 0, []), data[:6]
    # a profile after the pixels is part of the file; bytes after the profile are not
    profile = bytes(range(256)) * 3
    v5 = _v5_with_profile(natural(rng, 7, 13), profile)
    assert loads(v5).size == (13, 7)
    assert inspect_image(v5, "x.bmp").trailing == 0
    assert inspect_image(v5 + b"junk" * 10, "x.bmp").trailing == 40
    # a bfSize that declares the bytes after the pixels still leaves non-zero bytes beyond it as trailing data
    assert inspect_image(bmp + bytes(5), "x.bmp").trailing == 5  # more than alignment


def _v5_with_profile(pixels: np.ndarray, profile: bytes) -> bytes:
    """A 24-bit BMP with a V5 (124-byte) header and an embedded ICC profile after the pixel array."""
    h, w, _ = pixels.shape
    stride = (w * 3 + 3) // 4 * 4
    rows = b"".join(pixels[y, :, ::-1].tobytes() + bytes(stride - w * 3) for y in range(h - 1, -1, -1))
    offset = 14 + 124
    info = bytearray(124)
    info[0:4] = (124).to_bytes(4, "little")
    info[4:8] = w.to_bytes(4, "little")
    info[8:12] = h.to_bytes(4, "little")
    info[12:14] = (1).to_bytes(2, "little")
    info[14:16] = (24).to_bytes(2, "little")
    info[20:24] = len(rows).to_bytes(4, "little")
    info[56:60] = (0x4D424544).to_bytes(4, "little")  # 'MBED'
    info[112:116] = (124 + len(rows)).to_bytes(4, "little")  # from the start of the info header
    info[116:120] = len(profile).to_bytes(4, "little")
    total = offset + len(rows) + len(profile)
    return b"BM" + total.to_bytes(4, "little") + bytes(4) + offset.to_bytes(4, "little") + bytes(info) + rows + profile


ICC = Path("/usr/share/color/icc/ghostscript/srgb.icc")
"""An ICC profile for ImageMagick to embed (Ghostscript's sRGB, where installed)."""


@pytest.mark.skipif(shutil.which("convert-im6.q16") is None, reason="ImageMagick is not installed")
def test_bmps_imagemagick_writes_end_where_their_headers_say(tmp_path: Path, rng: np.random.Generator) -> None:
    """ImageMagick's BMP2, BMP3 and BMP4/5 (RLE8 for palettes, with runs over a row's padding; a V5 header
    with an ICC profile after the pixels)."""
    convert = shutil.which("convert-im6.q16")
    assert convert is not None
    for w, h in ((13, 7), (1, 1)):
        rgb = Image.fromarray(natural(rng, h, w))
        sources = {"rgb": rgb, "gray": rgb.convert("L"), "p16": rgb.quantize(16), "rgba": rgb.convert("RGBA")}
        for kind, im in sources.items():
            src = tmp_path / f"{kind}_{w}x{h}.png"
            im.save(src)
            for out, options in (
                ("BMP2", []),
                ("BMP3", []),
                ("BMP", []),
                ("BMP3", ["-compress", "RLE"]),
                ("BMP", ["-compress", "RLE"]),
                ("BMP", ["-type", "Palette", "-colors", "16", "-compress", "RLE"]),
                *([("BMP", ["-profile", str(ICC)])] if ICC.is_file() and kind == "rgb" else []),
            ):
                dest = tmp_path / f"{kind}_{w}x{h}_{out}_{len(options)}.bmp"
                subprocess.run([convert, str(src), *options, f"{out}:{dest}"], check=True, capture_output=True)
                data = dest.read_bytes()
                v = inspect_image(data, dest.name)
                assert (v.error, v.trailing, v.damage) == (None, 0, []), dest.name
                assert inspect_image(data + data, dest.name).trailing == len(data), dest.name


# -- 2. damaged RLE data --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rle4", [False, True])
def test_rle_bmps_decode_as_encoded_and_pass(rng: np.random.Generator, rle4: bool) -> None:
    for w, h in ((21, 12), (1, 1), (2, 3), (40, 6)):
        pixels = indices(rng, h, w)
        data = bmp_with(rle_stream(pixels, rle4), w, h, rle4)
        assert np.array_equal(np.asarray(loads(data)), pixels)  # the builder is right
        v = inspect_image(data, "x.bmp")
        assert (v.error, v.trailing, v.damage) == (None, 0, []), (w, h)
        v = inspect_image(data + b"trailing bytes here", "x.bmp")
        assert (v.trailing, v.damage) == (19, [])


@pytest.mark.parametrize("rle4", [False, True])
def test_damaged_rle_data_pillow_decodes_is_corrupt_image_data(rng: np.random.Generator, rle4: bool) -> None:
    w, h = 21, 12
    pixels = indices(rng, h, w)
    stream = rle_stream(pixels, rle4)
    kind = "RLE4" if rle4 else "RLE8"
    cases = {
        "overrun": (bytes([40, 5]) + stream, "a run of 40 pixels at row 0, column 0 overruns the row of 21 pixels"),
        "spill": (bytes([0, 30]) + bytes(16 if rle4 else 30) + stream, "(Pillow spills the pixels into the next row)"),
        "no end": (stream[:-2], "no end-of-bitmap code"),
        "extra rows": (stream[:-2] + rle_stream(pixels[:2], rle4), "pixels beyond the image's 12 rows"),
    }
    for name, (bad, words) in cases.items():
        data = bmp_with(bad, w, h, rle4)
        loads(data)  # Pillow decodes it without a word
        v = inspect_image(data, "x.bmp")
        assert v.error is None, name
        assert len(v.damage) == 1 and v.damage[0].startswith(f"damaged {kind} data: "), (name, v.damage)
        assert words in v.damage[0], (name, v.damage)
        assert v.trailing == 0, name


@pytest.mark.parametrize("rle4", [False, True], ids=["rle8", "rle4"])
def test_rle_codes_lost_from_the_middle_are_corrupt_image_data(rng: np.random.Generator, rle4: bool) -> None:
    """Bytes deleted from the middle of the codes, where the walk still finds its way to the end-of-bitmap code
    and Pillow decodes the rest shifted without a word (ImageMagick refuses the file): the headers still
    declare the data's full size, and the file holds less."""
    w, h = 21, 12
    stream = rle_stream(indices(rng, h, w), rle4)
    data = bmp_with(stream, w, h, rle4)
    start = len(data) - len(stream)
    kind = "RLE4" if rle4 else "RLE8"
    found = 0
    for at in range(start + 2, len(data) - 8):
        for lost in (1, 2, 3):
            damaged = data[:at] + data[at + lost :]
            try:
                loads(damaged)
            except (OSError, ValueError):
                continue  # Pillow fails on it: an error either way
            v = inspect_image(damaged, "x.bmp")
            assert v.error is None and len(v.damage) == 1, (at, lost, v.error, v.damage)
            assert v.damage[0].startswith(f"damaged {kind} data: "), (at, lost, v.damage)
            found += "bytes lost from it" in v.damage[0]
    assert found, "no deletion that only the declared size gives away"


def test_rle_data_cut_short_is_damage_or_an_error(rng: np.random.Generator, tmp_path: Path, write: Write) -> None:
    """A cut stream: where Pillow fails it stays corrupt-image; where it decodes (the cut after the last row's
    pixels), corrupt-image-data."""
    w, h = 21, 12
    pixels = indices(rng, h, w)
    stream = rle_stream(pixels, False)
    write("cut_end.bmp", bmp_with(stream[:-3], w, h))  # the end of line and end of bitmap lost
    write("cut_half.bmp", bmp_with(stream[: len(stream) // 2], w, h))
    report = scan_dir(tmp_path)
    assert [p for p, _ in details(report, "I004")] == ["cut_end.bmp"]
    assert "no end-of-bitmap code" in details(report, "I004")[0][1]
    assert [p for p, _ in details(report, "I003")] == ["cut_half.bmp"]


# -- 3. a list with classic Mac OS line endings ---------------------------------------------------------------


def _images(write: Write, rng: np.random.Generator, *names: str) -> None:
    for i, name in enumerate(names):
        write(name, encode(Image.fromarray(natural(rng, 40 + i, 40)), "PNG"))


def test_a_list_with_cr_line_endings_is_named_so_and_read_line_by_line(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    _images(write, rng, "img/a.png", "img/b.png", "img/c.png")
    write("train.txt", b"img/a.png 0\rimg/b.png 1\rimg/c.png 1\r")
    report = scan_dir(tmp_path / "train.txt")
    assert details(report, "S004") == []
    assert details(report, "S005") == [
        (
            "train.txt:1",
            "the list uses CR line endings (classic Mac OS): Caffe's std::getline reads its 3 lines as one line"
            " (Python's open() splits them, and so does this scan); convert them to LF: tr '\\r' '\\n'",
        )
    ]
    assert report.summary.items_scanned == 3
    assert report.labels[0].total == 3
    # unlabelled, and with a missing file: the lines are numbered as an editor shows them
    write("paths.txt", b"img/a.png\rimg/gone.png\rimg/c.png")
    report = scan_dir(tmp_path / "paths.txt")
    assert details(report, "S004") == [("paths.txt:2", "img/gone.png does not exist")]
    assert [d for _, d in details(report, "S005")] == [
        "the list uses CR line endings (classic Mac OS): Caffe's std::getline reads its 3 lines as one line"
        " (Python's open() splits them, and so does this scan); convert them to LF: tr '\\r' '\\n'"
    ]
    assert report.summary.items_scanned == 2
    # Windows line endings, and one line ended by a CR, are no such list
    write("crlf.txt", b"img/a.png 0\r\nimg/b.png 1\r\n")
    write("one.txt", b"img/a.png 0\r")
    for name in ("crlf.txt", "one.txt"):
        report = scan_dir(tmp_path / name)
        assert details(report, "S005") == [] and details(report, "S004") == [], name


# -- 4. one file listed twice ---------------------------------------------------------------------------------


def test_a_file_listed_twice_is_named_as_one_file_on_two_lines(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    _images(write, rng, "img/a.png", "img/b.png")
    write("img/copy.png", (tmp_path / "img/a.png").read_bytes())
    write("same.txt", b"img/a.png 0\nimg/b.png 1\n./img/a.png 0\n")
    assert details(scan_dir(tmp_path / "same.txt"), "I013") == [
        ("img/a.png:1", "the same file listed on lines 1 and 3 (each epoch reads it 2 times)")
    ]
    # two labels for one file: a label conflict
    write("conflict.txt", b"img/a.png 0\nimg/b.png 1\nimg/a.png 1\nimg/a.png 0\n")
    assert details(scan_dir(tmp_path / "conflict.txt"), "I013") == [
        (
            "img/a.png:1",
            "the same file listed on lines 1, 3 and 4 (each epoch reads it 3 times); label conflict: labels 0, 1",
        )
    ]
    # spelled once by its absolute path: still one file, placed at its first line
    write("spelled.txt", f"img/b.png 1\nimg/a.png 0\n{tmp_path / 'img/a.png'} 0\n".encode())
    assert details(scan_dir(tmp_path / "spelled.txt"), "I013") == [
        ("img/a.png:2", "the same file listed on lines 2 and 3 (each epoch reads it 2 times)")
    ]
    # a copy besides: both said
    write("mixed.txt", b"img/a.png 0\nimg/copy.png 0\nimg/b.png 1\nimg/a.png 0\n")
    assert details(scan_dir(tmp_path / "mixed.txt"), "I013") == [
        (
            "img/a.png:1",
            "3 identical copies: also img/a.png:4, img/copy.png:2; img/a.png is one file listed on lines 1 and 4",
        )
    ]
