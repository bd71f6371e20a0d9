"""Each image check on generated files, through a real scan of a folder: code, place and detail."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import codes, encode, finding, jpeg, natural, places, png, png_bytes, scan_dir, zero_block
from PIL import Image

Write = Callable[[str, bytes], Path]


def _details(report: object, code: str) -> dict[str, str]:
    f = finding(report, code)
    return {loc.path: loc.detail for loc in f.locations} if f else {}


def test_clean_varied_dataset_has_no_error_and_no_damage(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """Valid JPEGs and PNGs of every kind: no error, no damage, no trailing data, nothing constant."""
    for i in range(4):
        write(f"a/base_{i}.jpg", jpeg(rng))
        write(f"a/prog_{i}.jpg", jpeg(rng, progressive=True))
        write(f"b/gray_{i}.jpg", jpeg(rng, mode="L"))
        write(f"b/p444_{i}.jpg", jpeg(rng, subsampling=0))
        write(f"c/rgb_{i}.png", png(rng))
        write(f"c/rgba_{i}.png", png(rng, mode="RGBA"))
        write(f"c/pal_{i}.png", png(rng, mode="P"))
    write("a/cmyk.jpg", jpeg(rng, mode="CMYK"))
    for colour, depths in (
        (0, (1, 2, 4, 8, 16)),
        (2, (8, 16)),
        (3, (1, 2, 4, 8)),
        (4, (8, 16)),
        (6, (8, 16)),
    ):
        for depth in depths:
            for interlace in (False, True):
                ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
                px = rng.integers(0, 1 << depth, (40, 36, ch), dtype=np.uint32)
                px = px.astype(np.uint16 if depth == 16 else np.uint8)
                pal = bytes(rng.integers(0, 256, 3 << depth, dtype=np.uint8)) if colour == 3 else None
                write(f"d/t{colour}_{depth}_{int(interlace)}.png", png_bytes(px, colour, depth, interlace, pal))
    report = scan_dir(tmp_path, shard_bytes=1 << 16)
    assert report.summary.errors == 0, report.findings
    assert not codes(report) & {"I003", "I004", "I006", "I008", "I009"}
    assert report.summary.items_scanned == 4 * 7 + 1 + 2 * 15
    unusual = _details(report, "I010")
    assert "a/cmyk.jpg" in unusual and "d/t0_16_0.png" in unusual and "d/t4_8_1.png" in unusual
    assert "c/rgb_0.png" not in unusual


def test_empty_file_and_not_an_image(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("x/ok.jpg", jpeg(rng))
    write("x/empty.jpg", b"")
    write("x/page.jpg", b"<html><head><title>403 Forbidden</title></head></html>")
    write("x/._ok.jpg", b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + bytes(64))
    write("x/noext", b"plain words, no picture")
    report = scan_dir(tmp_path)
    assert places(report, "I001") == ["x/empty.jpg"]
    details = _details(report, "I002")
    assert set(details) == {"x/._ok.jpg", "x/noext", "x/page.jpg"}
    assert "HTML" in details["x/page.jpg"] and "text" in details["x/noext"]
    assert "AppleDouble" in details["x/._ok.jpg"]
    assert "I003" not in codes(report)


def test_corrupt_image_names_the_reason_and_the_decoder(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    good_jpeg, good_png = jpeg(rng, 120, 160), png(rng)
    write("ok.jpg", good_jpeg)
    write("cut.jpg", good_jpeg[: len(good_jpeg) // 2])
    flipped = bytearray(good_png)
    flipped[good_png.index(b"IDAT") + 30] ^= 0x10
    write("crc.png", bytes(flipped))
    write("cut.gif", encode(Image.fromarray(natural(rng, 40, 40)).convert("P"), "GIF")[:200])
    report = scan_dir(tmp_path)
    details = _details(report, "I003")
    assert set(details) == {"cut.jpg", "crc.png", "cut.gif"}
    assert "no end-of-image marker" in details["cut.jpg"] and "[libjpeg-turbo" in details["cut.jpg"]
    assert "bad CRC in the IDAT chunk" in details["crc.png"]
    assert "[Pillow" in details["cut.gif"]


def test_corrupt_image_data_is_a_warning(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("zeroed.jpg", zero_block(jpeg(rng, 160, 200)))
    write("fine.jpg", jpeg(rng))
    report = scan_dir(tmp_path)
    f = finding(report, "I004")
    assert f is not None and f.severity.value == "warning"
    assert [loc.path for loc in f.locations] == ["zeroed.jpg"]
    assert "Corrupt JPEG data" in (f.locations[0].detail or "")
    assert report.summary.errors == 0


def test_extension_mismatch(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("png_named.jpg", png(rng))
    write("jpeg_named.PNG", jpeg(rng))
    write("right.JPEG", jpeg(rng))
    write("no_extension", png(rng))
    details = _details(scan_dir(tmp_path), "I005")
    assert set(details) == {"png_named.jpg", "jpeg_named.PNG"}
    assert details["png_named.jpg"] == "content is PNG, the extension .jpg says JPEG"


def test_trailing_data(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("glued.jpg", jpeg(rng) + jpeg(rng))
    write("payload.png", png(rng) + b"PK\x03\x04" + bytes(100))
    write("clean.jpg", jpeg(rng))
    details = _details(scan_dir(tmp_path), "I006")
    assert set(details) == {"glued.jpg", "payload.png"}
    assert "another JPEG image" in details["glued.jpg"]
    assert details["payload.png"].startswith("104 bytes after the end of the image")


def test_decompression_bomb_is_an_error_without_decoding(tmp_path: Path, write: Write) -> None:
    small = encode(Image.new("RGB", (64, 64)), "JPEG")
    sof = small.index(b"\xff\xc0") + 5
    write("huge.jpg", small[:sof] + (30_000).to_bytes(2, "big") * 2 + small[sof + 4 :])
    write("fine.jpg", small)
    report = scan_dir(tmp_path, max_pixels=10_000_000)
    f = finding(report, "I007")
    assert f is not None and f.severity.value == "error"
    assert [(loc.path, loc.detail) for loc in f.locations] == [
        ("huge.jpg", "30000×30000 = 900,000,000 pixels declared (limit 10,000,000)")
    ]
    assert "I003" not in codes(report)  # never decoded, so never judged corrupt
    assert "I007" not in codes(scan_dir(tmp_path, max_pixels=10**9))


def test_constant_and_tiny_images(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("black.jpg", encode(Image.new("RGB", (64, 64)), "JPEG"))
    write("white.png", encode(Image.new("L", (64, 64), 255), "PNG"))
    write("photo.jpg", jpeg(rng))
    write("thumb.png", png(rng, h=20, w=100))
    report = scan_dir(tmp_path)
    constant = _details(report, "I008")
    assert set(constant) == {"black.jpg", "white.png"}
    assert constant["white.png"] == "every pixel is 255 (64×64)"
    assert _details(report, "I009") == {"thumb.png": "100×20 (short side 20 < 32)"}
    assert _details(scan_dir(tmp_path, min_size=16), "I009") == {}
    tiny = _details(scan_dir(tmp_path, min_size=100), "I009")
    assert set(tiny) == {"black.jpg", "photo.jpg", "thumb.png", "white.png"}


def test_unusual_modes_and_float_pixels(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("cmyk.jpg", jpeg(rng, mode="CMYK"))
    write("sixteen.png", encode(Image.fromarray(rng.integers(0, 65535, (40, 40), dtype=np.uint16)), "PNG"))
    write("la.png", png(rng, mode="LA"))
    write("ptrns.png", encode(Image.fromarray(natural(rng, 40, 40)).convert("P"), "PNG", transparency=0))
    depth = np.full((40, 40), 1.5, np.float32)
    depth[3, 4] = np.nan
    depth[5, 6] = np.inf
    depth[7, 8] = -np.inf
    write("depth.tif", encode(Image.fromarray(depth), "TIFF"))
    # PFM (disparity and depth datasets): "Pf", size, a negative scale for little-endian, rows bottom-up
    write("disparity.pfm", b"Pf\n40 40\n-1.0\n" + depth[::-1].astype("<f4").tobytes())
    write("rgb.jpg", jpeg(rng))
    report = scan_dir(tmp_path)
    unusual = _details(report, "I010")
    assert set(unusual) == {"cmyk.jpg", "sixteen.png", "la.png", "ptrns.png", "depth.tif", "disparity.pfm"}
    assert unusual["cmyk.jpg"].startswith("CMYK")
    assert unusual["ptrns.png"].startswith("P with transparency")
    nan, inf = finding(report, "V001"), finding(report, "V002")
    assert [(loc.path, loc.detail) for loc in nan.locations] == [
        ("depth.tif", "1 NaN pixel value"),
        ("disparity.pfm", "1 NaN pixel value"),
    ]
    assert (inf.count, inf.values, inf.locations[0].path) == (2, 4, "depth.tif")


def test_channel_mismatch_reports_the_minority(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    for i in range(9):
        write(f"rgb_{i}.jpg", jpeg(rng))
    write("gray.jpg", jpeg(rng, mode="L"))
    f = finding(scan_dir(tmp_path), "I011")
    assert f is not None and f.count == 1
    assert (f.locations[0].path, f.locations[0].detail) == ("gray.jpg", "grayscale (L) among 9 colour images")
    for i in range(4):
        write(f"gray_{i}.png", png(rng, mode="L"))
    assert finding(scan_dir(tmp_path), "I011") is None  # 5 of 14: no clear majority to break


def test_exif_rotation(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    exif = Image.Exif()
    exif[0x0112] = 8
    write("sideways.jpg", encode(Image.fromarray(natural(rng, 40, 60)), "JPEG", exif=exif))
    exif[0x0112] = 1
    write("upright.jpg", encode(Image.fromarray(natural(rng, 40, 60)), "JPEG", exif=exif))
    assert _details(scan_dir(tmp_path), "I012") == {
        "sideways.jpg": "EXIF orientation 8: upright after rotating 90° counter-clockwise"
    }


def test_duplicates_across_classes_are_label_conflicts(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    same, other = jpeg(rng), jpeg(rng)
    write("cat/a.jpg", same)
    write("cat/b.jpg", same)
    write("dog/c.jpg", other)
    write("dog/d.jpg", other)
    write("fox/e.jpg", other)
    write("fox/f.jpg", jpeg(rng))
    write("fox/empty1.jpg", b"")
    write("fox/empty2.jpg", b"")
    f = finding(scan_dir(tmp_path, shard_bytes=1 << 16), "I013")
    assert (f.count, f.values) == (2, 3)
    assert [(loc.path, loc.detail) for loc in f.locations] == [
        ("cat/a.jpg", "2 identical copies: also cat/b.jpg"),
        (
            "dog/c.jpg",
            "3 identical copies: also dog/d.jpg, fox/e.jpg; label conflict: labels 1 (dog), 2 (fox)",
        ),
    ]


def test_duplicate_groups_beyond_the_cap_are_counted_and_the_shown_ones_come_first_in_storage_order(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """Groups are placed by their first copy, whichever shard read it; only the shown ones are named."""
    images = [jpeg(rng) for _ in range(5)]
    for i in range(20):  # copy i of image i % 5: groups of 4, their copies spread over every shard
        write(f"img{i:02d}.jpg", images[(19 - i) % 5])
    f = finding(scan_dir(tmp_path, shard_bytes=1 << 12, max_locations=2), "I013")
    assert (f.count, f.values) == (5, 15)
    assert [(loc.path, loc.detail) for loc in f.locations] == [
        ("img00.jpg", "4 identical copies: also img05.jpg, img10.jpg, img15.jpg"),
        ("img01.jpg", "4 identical copies: also img06.jpg, img11.jpg, img16.jpg"),
    ]


@pytest.mark.parametrize("code", ["I003", "corrupt-image"])
def test_ignoring_a_check_removes_it(tmp_path: Path, write: Write, rng: np.random.Generator, code: str) -> None:
    write("cut.jpg", jpeg(rng)[:500])
    assert "I003" in codes(scan_dir(tmp_path))
    assert "I003" not in codes(scan_dir(tmp_path, ignore=(code,)))
