"""Image checks judged against known truth: generated files with one defect each, and the clean look-alikes
beside them, through a real scan of a folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import encode, finding, jpeg, natural, places, png, scan_dir
from PIL import Image
from PIL.PngImagePlugin import PngInfo

Write = Callable[[str, bytes], Path]


def test_a_constant_png_stored_without_compression_is_a_constant_image(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """A writer at compression level 0 stores a constant image at full size: its size suggested no constant
    image, and the file passed. One differing pixel, stored the same way, is no constant image."""
    write("const_stored.png", encode(Image.new("RGB", (300, 300), (200, 10, 10)), "PNG", compress_level=0))
    write("const_gray_stored.png", encode(Image.new("L", (300, 300), 0), "PNG", compress_level=0))
    near = np.full((300, 300, 3), 77, np.uint8)
    near[299, 299] = (78, 77, 77)
    write("near_stored.png", encode(Image.fromarray(near), "PNG", compress_level=0))
    write("photo_stored.png", encode(Image.fromarray(natural(rng, 300, 300)), "PNG", compress_level=0))
    report = scan_dir(tmp_path)
    assert places(report, "I008") == ["const_gray_stored.png", "const_stored.png"]
    details = {loc.path: loc.detail for loc in finding(report, "I008").locations}
    assert details["const_stored.png"] == "every pixel is (200, 10, 10) (300×300)"


@pytest.mark.parametrize("fmt", ["GIF", "BMP", "TIFF", "WEBP", "PNG", "JPEG"])
def test_an_image_of_exactly_an_odd_max_pixels_is_no_bomb(tmp_path: Path, write: Write, fmt: str) -> None:
    """63×65 = 4,095 pixels with --max-pixels 4095: Pillow's limit was half of it rounded down, so Pillow
    refused the file ('4,095 pixels declared (limit 4,095)'); one pixel fewer allowed is a bomb."""
    image = Image.fromarray(np.random.default_rng(1).integers(0, 256, (65, 63, 3), dtype=np.uint8))
    write(f"at_limit.{fmt.lower()}", encode(image, fmt, **({"lossless": True} if fmt == "WEBP" else {})))
    assert finding(scan_dir(tmp_path, max_pixels=4095), "I007") is None
    assert places(scan_dir(tmp_path, max_pixels=4094), "I007") == [f"at_limit.{fmt.lower()}"]


def _exif_segment(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    body = exif.tobytes()  # with JPEG's "Exif\0\0" prefix
    assert body.startswith(b"Exif\x00\x00")
    return b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body


def _xmp_packet(orientation: int, element: bool) -> bytes:
    inner = (
        f"<tiff:Orientation>{orientation}</tiff:Orientation>"
        if element
        else f'<rdf:Description tiff:Orientation="{orientation}"/>'
    )
    return f'<x:xmpmeta xmlns:x="adobe:ns:meta/">{inner}</x:xmpmeta>'.encode()


def test_an_orientation_in_xmp_alone_is_exif_rotation_as_pillow_reads_it(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """Pillow's getexif() takes XMP's tiff:Orientation where EXIF has none, so exif_transpose turns the
    image, and loaders that read neither do not: such a JPEG or PNG passed. An EXIF orientation comes first."""
    data = jpeg(rng)
    segment = b"http://ns.adobe.com/xap/1.0/\x00" + _xmp_packet(6, element=True)
    xmp_app1 = b"\xff\xe1" + (len(segment) + 2).to_bytes(2, "big") + segment
    write("xmp_only.jpg", data[:2] + xmp_app1 + data[2:])
    write("exif_first.jpg", data[:2] + _exif_segment(1) + xmp_app1 + data[2:])
    info = PngInfo()
    info.add_itxt("XML:com.adobe.xmp", _xmp_packet(8, element=False).decode())
    write("xmp_only.png", encode(Image.fromarray(natural(rng, 40, 48)), "PNG", pnginfo=info))
    for name, expected in (("xmp_only.jpg", 6), ("exif_first.jpg", 1), ("xmp_only.png", 8)):
        with Image.open(tmp_path / name) as im:
            assert im.getexif().get(0x0112) == expected, name
    report = scan_dir(tmp_path)
    details = {loc.path: loc.detail for loc in finding(report, "I012").locations}
    assert details == {
        "xmp_only.jpg": "XMP orientation (tiff:Orientation; no EXIF one) 6: upright after rotating 90° clockwise",
        "xmp_only.png": (
            "XMP orientation (tiff:Orientation; no EXIF one) 8: upright after rotating 90° counter-clockwise"
        ),
    }


def test_the_first_of_two_exif_segments_gives_the_orientation(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """Pillow's getexif() (and so exif_transpose) reads the first EXIF segment of a JPEG; the last one was
    read, so a file that loads upright was reported rotated, and a rotated one passed."""
    data = jpeg(rng)
    for name, first, second in (("upright.jpg", 1, 6), ("rotated.jpg", 6, 1)):
        file = write(name, data[:2] + _exif_segment(first) + _exif_segment(second) + data[2:])
        with Image.open(file) as im:
            assert im.getexif().get(0x0112) == first
    report = scan_dir(tmp_path)
    assert places(report, "I012") == ["rotated.jpg"]
    assert finding(report, "I012").locations[0].detail == "EXIF orientation 6: upright after rotating 90° clockwise"


def test_clean_look_alikes_are_not_flagged(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    """Look-alikes of each defect that must pass: one differing pixel, exactly --min-size, equal RGB
    channels, EXIF orientation 1, a palette without transparency, copies inside one class."""
    near = np.full((64, 64, 3), 77, np.uint8)
    near[10, 20] = (78, 77, 77)
    write("a/near_constant.png", encode(Image.fromarray(near), "PNG"))
    write("a/exactly_min.png", encode(Image.fromarray(natural(rng, 32, 100)), "PNG"))
    gray = natural(rng, 64, 64, 1)
    write("a/equal_channels.png", encode(Image.fromarray(np.stack([gray] * 3, -1)), "PNG"))
    exif = Image.Exif()
    exif[0x0112] = 1
    write("a/orientation_1.jpg", encode(Image.fromarray(natural(rng, 64, 64)), "JPEG", exif=exif))
    write("a/palette.png", png(rng, 64, 64, mode="P"))
    copy = jpeg(rng)
    write("a/copy_1.jpg", copy)
    write("a/copy_2.jpg", copy)
    write("b/other.jpg", jpeg(rng))
    report = scan_dir(tmp_path)
    assert {f.code for f in report.findings} == {"I013"}, report.findings
    assert "label conflict" not in finding(report, "I013").locations[0].detail


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG", "JPEG"])
def test_zero_padding_after_the_image_is_named_padding_in_every_format(
    tmp_path: Path, write: Write, rng: np.random.Generator, fmt: str
) -> None:
    """Zero bytes after a GIF's trailer or a WebP's RIFF size were 'unknown data'; JPEG and PNG said
    'zero bytes (padding)'."""
    image = Image.fromarray(natural(rng, 40, 40))
    write(f"padded.{fmt.lower()}", encode(image, fmt, **({"lossless": True} if fmt == "WEBP" else {})) + bytes(4))
    [location] = finding(scan_dir(tmp_path), "I006").locations
    assert location.detail == "4 bytes after the end of the image: zero bytes (padding)"


@pytest.mark.parametrize("num_classes", [3, 5])
def test_class_folder_names_stay_when_num_classes_differs(tmp_path: Path, num_classes: int) -> None:
    """``--num-classes`` other than the number of class folders dropped every folder's name: 'class 3'
    instead of 'class 3 (d_empty)', and null names in the histogram."""
    rng = np.random.default_rng(0)
    for name in ("a_cat", "b_dog", "c_fox", "d_empty"):
        (tmp_path / name).mkdir()
        if name != "d_empty":
            for i in range(3):
                (tmp_path / name / f"{i}.png").write_bytes(png(rng))
    report = scan_dir(tmp_path, num_classes=num_classes)
    names = {row.label: row.name for row in report.labels[0].histogram}
    assert {k: names[k] for k in range(3)} == {0: "a_cat", 1: "b_dog", 2: "c_fox"}
    missing = [loc.detail for loc in finding(report, "L003").locations] if num_classes == 5 else []
    assert missing == (["class 3 (d_empty)", "class 4"] if num_classes == 5 else [])


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF"])
def test_an_archive_after_the_image_is_named(tmp_path: Path, fmt: str) -> None:
    """A ZIP archive appended to an image (a hidden payload) was 'unknown data'; dscan's content sniffer knows
    it, in every format's trailing-data check."""
    import io
    import zipfile

    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as zf:
        zf.writestr("secret.txt", "x" * 100)
    image = encode(Image.fromarray(natural(np.random.default_rng(1), 32, 32)).convert("RGB"), fmt)
    (tmp_path / f"a.{fmt.lower()}").write_bytes(image + payload.getvalue())
    (tmp_path / f"b.{fmt.lower()}").write_bytes(image + b"\x01\x02junk" * 10)
    found = finding(scan_dir(tmp_path), "I006")
    assert [loc.detail.split(": ", 1)[1] for loc in found.locations] == ["a ZIP archive", "unknown data"]
