"""The rarer formats Pillow reads (Sun raster, FITS, XPM, ICNS, DCX, MPO ...): an image folder scans them like
any image instead of leaving them out as sidecar files, but not what shares their extensions without being
an image (point clouds in .pcd, Gerber files in .gbr)."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import codes, encode, finding, natural, png, scan_dir
from PIL import Image

from scanner_service.imaging import inspect_image
from scanner_service.imaging.sniff import claimed_format, sniff

Write = Callable[[str, bytes], Path]


def sun_raster(pixels: np.ndarray) -> bytes:
    """An 8-bit grayscale Sun raster file (a 32-byte header, then the rows)."""
    h, w = pixels.shape
    return struct.pack(">8I", 0x59A66A95, w, h, 8, w * h, 1, 0, 0) + pixels.astype(np.uint8).tobytes()


def fits_image(pixels: np.ndarray) -> bytes:
    """A FITS file holding one float32 image (80-character header cards in 2,880-byte blocks)."""
    h, w = pixels.shape
    cards = ["SIMPLE  = " + "T".rjust(20), "BITPIX  = " + "-32".rjust(20), "NAXIS   = " + "2".rjust(20)]
    cards += ["NAXIS1  = " + str(w).rjust(20), "NAXIS2  = " + str(h).rjust(20), "END"]
    header = "".join(card.ljust(80) for card in cards).encode()
    data = pixels.astype(">f4").tobytes()
    return header + b" " * (-len(header) % 2880) + data + bytes(-len(data) % 2880)


XPM = (
    b'/* XPM */\nstatic char *x[] = {\n"40 40 2 1",\n"a c #FF0000",\n"b c #0000FF",\n'
    + b",\n".join(b'"' + (b"ab" * 20 if row % 2 else b"ba" * 20) + b'"' for row in range(40))
    + b"\n};\n"
)
"""A 40×40 two-colour XPM (C source text: Pillow reads it as a palette image)."""


def dcx(pcx: bytes) -> bytes:
    """A one-page DCX: its magic number, the page's offset, the end of the offset table, then a PCX."""
    return struct.pack("<3I", 0x3ADE68B1, 12, 0) + pcx


def test_rare_formats_in_a_folder_are_scanned_and_pass(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    picture = Image.fromarray(natural(rng))
    files = {
        "a/sun.ras": sun_raster(natural(rng, channels=1)),
        "a/sky.fits": fits_image(rng.normal(size=(40, 48)).astype(np.float32)),
        "a/icon.xpm": XPM,
        "a/icon.icns": encode(picture.resize((32, 32)), "ICNS"),
        "a/pages.dcx": dcx(encode(picture, "PCX")),
        "b/stereo.mpo": encode(picture, "MPO", save_all=True, append_images=[picture]),
        "b/silicon.rgba": encode(picture, "SGI"),  # (an extension raw pixel dumps use too: taken by content)
    }
    for rel, data in files.items():
        write(rel, data)
    # extensions a rare image format shares with common data of other kinds: sidecars, as before
    write("b/scan.pcd", b"# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS x y z\n")
    write("b/board.gbr", b"%FSLAX26Y26*%\n%MOMM*%\nD10*\nX0Y0D02*\nM02*\n")
    write("b/dump.rgba", bytes(64 * 64 * 4))
    report = scan_dir(tmp_path)
    assert report.info["images.skipped"] == "3 files not scanned as images: 1 .gbr, 1 .pcd, 1 .rgba", report.info
    assert report.summary.items_scanned == len(files)
    assert codes(report) <= {"I010"}, codes(report)  # (the FITS image is mode F: an unusual mode, no error)
    assert [(row.name, row.count) for row in report.labels[0].histogram] == [("a", 5), ("b", 2)]


def test_the_rare_formats_are_told_by_content(rng: np.random.Generator) -> None:
    """Their signatures name them, so a Sun raster saved as '.jpg' is an extension mismatch, and one under an
    extension no format claims is still recognised as an image."""
    samples = {
        "sun": sun_raster(natural(rng, channels=1)),
        "fits": fits_image(np.zeros((8, 8), np.float32)),
        "xpm": XPM,
        "icns": encode(Image.fromarray(natural(rng)).resize((32, 32)), "ICNS"),
        "dcx": dcx(encode(Image.fromarray(natural(rng)), "PCX")),
    }
    for fmt, data in samples.items():
        assert sniff(data[:64]) == fmt
        assert claimed_format(f"x.{'ras' if fmt == 'sun' else fmt}") == fmt
        verdict = inspect_image(data, "photo.jpg")
        assert verdict.error is None and verdict.format == fmt, (fmt, verdict)
    assert sniff(b"DanM" + bytes(28)) is None  # MSP's signature is text a sidecar can start with: by extension


def test_damaged_rare_formats_are_errors_and_float_nan_is_found(tmp_path: Path, write: Write) -> None:
    gray = (np.arange(32 * 40) % 251).reshape(32, 40)
    write("cut.ras", sun_raster(gray)[:-100])  # rows missing at the end
    sky = np.ones((40, 48), np.float32)
    sky[3, 5] = np.nan  # a blank pixel, as survey images hold them
    write("sky.fits", fits_image(sky))
    write("fake.xpm", png(np.random.default_rng(1)))  # a PNG under an XPM name
    report = scan_dir(tmp_path)
    corrupt = finding(report, "I003")
    assert corrupt is not None and [loc.path for loc in corrupt.locations] == ["cut.ras"]
    nan = finding(report, "V001")
    assert nan is not None and [loc.path for loc in nan.locations] == ["sky.fits"] and nan.values == 1
    mismatch = finding(report, "I005")
    assert mismatch is not None and [loc.path for loc in mismatch.locations] == ["fake.xpm"]


def test_a_12_bit_jpeg_is_judged_by_pillow_which_cannot_read_it(rng: np.random.Generator) -> None:
    """12-bit samples (medical and scientific JPEGs) were corrupt-image with libjpeg-turbo's "Unsupported JPEG
    data precision 12", credited to libjpeg-turbo, whose own 12-bit interface decodes them. The error stands
    (Pillow, and a loader built on it, cannot read them), in Pillow's words."""
    data = bytearray(encode(Image.fromarray(natural(rng, 32, 40)), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 4] = 12  # the frame header's sample precision
    verdict = inspect_image(bytes(data), "scan.jpg")
    assert verdict.judge == "pillow" and verdict.error is not None
    assert "12-bit" in verdict.error and "Unsupported JPEG data precision" not in verdict.error


def test_a_netpbm_file_with_a_comment_right_after_its_magic_number_is_one(rng: np.random.Generator) -> None:
    """netpbm reads ``P6#comment``; it was not-an-image ("unknown binary data"). Pillow cannot read it: a
    Pillow-based loader fails, so it is corrupt-image, named as the PPM it is."""
    verdict = inspect_image(b"P6#made by hand\n2 1\n255\n" + bytes(range(6)), "c.ppm")
    assert verdict.format == "pnm" and verdict.error is not None and verdict.error.startswith("Pillow")


def test_a_webp_whose_exif_chunk_pillow_cannot_read_decodes_with_a_warning(rng: np.random.Generator) -> None:
    """The orientation lookup (getexif) raised on a garbage EXIF chunk, and that became corrupt-image for a
    file whose pixels load; exif_transpose() raises on it, so it is damage, not an error."""
    data = encode(Image.fromarray(natural(rng, 32, 40)), "WEBP", exif=b"garbage-exif-data")
    with Image.open(io.BytesIO(data)) as im:
        im.load()
    verdict = inspect_image(data, "a.webp")
    assert verdict.error is None and verdict.format == "webp"
    assert [d.split(" (")[0] for d in verdict.damage] == ["EXIF data Pillow cannot read"]


def test_icon_entries_that_share_one_image_judge_it_once(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An icon directory may hold 65,535 entries, all naming one image: each was judged again (a crafted
    266 KB file took minutes). The image is judged once; the entries are all inside the file."""
    from scanner_service.imaging import ico

    picture = encode(Image.fromarray(natural(rng, 16, 16)), "PNG")
    entries = 500
    start = 6 + 16 * entries
    directory = b"".join(struct.pack("<BBBBHHII", 16, 16, 0, 0, 1, 32, len(picture), start) for _ in range(entries))
    data = struct.pack("<HHH", 0, 1, entries) + directory + picture
    judged: list[str] = []
    real = ico._png

    def counting(part: object, label: str, verdict: object, max_pixels: int) -> bool:
        judged.append(label)
        return real(part, label, verdict, max_pixels)  # type: ignore[arg-type]

    monkeypatch.setattr(ico, "_png", counting)
    verdict = inspect_image(data, "many.ico")
    assert verdict.format == "ico" and verdict.error is None
    assert len(judged) == 1
