"""Image files as they come in the wild: lossless JPEGs (DNG previews, medical exports), AVIF files whose
major brand is the generic HEIF one, SVGs and camera raw files saved under an image extension."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import codes, encode, finding, natural, scan_dir
from PIL import Image

from scanner_service import Report
from scanner_service.imaging import inspect_image, judge_label


def _segment(marker: int, body: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body


def lossless_jpeg(pixels: np.ndarray, ids: bytes = b"RGB") -> bytes:
    """A lossless (SOF3) JPEG of 8-bit ``pixels``, gray (H, W) or of C components (H, W, C) interleaved, each
    with the identifier in ``ids`` ('R', 'G', 'B': an RGB frame to libjpeg; 1, 2, 3: YCbCr): predictor 1 (left;
    above at the start of a row), every difference category coded in 5 bits. Pillow writes no lossless JPEG;
    libjpeg-turbo 3 reads them."""
    x = pixels.astype(np.int64).reshape(*pixels.shape[:2], -1)
    h, w, channels = x.shape
    ids = ids[:channels] if channels > 1 else b"\x01"
    bits: list[int] = []

    def put(value: int, length: int) -> None:
        bits.extend((value >> i) & 1 for i in range(length - 1, -1, -1))

    for r in range(h):
        for c in range(w):
            for k in range(channels):
                pred = 128 if r == c == 0 else int(x[r, c - 1, k] if c else x[r - 1, c, k])
                d = int(x[r, c, k]) - pred
                size = abs(d).bit_length()
                put(size, 5)
                if size:
                    put(d if d >= 0 else d + (1 << size) - 1, size)
    bits.extend([1] * (-len(bits) % 8))
    data = np.packbits(np.array(bits, np.uint8)).tobytes().replace(b"\xff", b"\xff\x00")
    table = bytes([0, 0, 0, 0, 17] + [0] * 11) + bytes(range(17))  # 17 codes of 5 bits
    frame = b"".join(bytes([i, 0x11, 0]) for i in ids)
    scan = b"".join(bytes([i, 0]) for i in ids)
    return (
        b"\xff\xd8"
        + _segment(0xC3, bytes([8]) + struct.pack(">HH", h, w) + bytes([len(ids)]) + frame)
        + _segment(0xC4, b"\x00" + table)
        + _segment(0xDA, bytes([len(ids)]) + scan + b"\x01\x00\x00")
        + data
        + b"\xff\xd9"
    )


def test_the_lossless_jpeg_writer_is_read_exactly_by_pillow(rng: np.random.Generator) -> None:
    for pixels in (natural(rng, 24, 40, 1), natural(rng, 24, 40, 3)):
        with Image.open(io.BytesIO(lossless_jpeg(pixels))) as im:
            assert np.array_equal(np.asarray(im), pixels)


INSPECT = """
import sys
from scanner_service import Report
from scanner_service.imaging import inspect_image
with open(sys.argv[1], "rb") as fh:
    verdict = inspect_image(fh.read(), "a.jpg")
print(verdict.format, verdict.mode, verdict.error, verdict.damage)
"""


def test_inspecting_a_lossless_jpeg_does_not_overrun_the_decoder_buffer(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    # libjpeg-turbo cannot scale a lossless frame: asked for 1/8, it wrote the whole image into the buffer
    # of the small one, and the process died of SIGSEGV (in a scan: "the decoder crashed", or a crash later,
    # blamed on another file) on a file Pillow reads exactly. In a process of its own, as a crash would be.
    path = tmp_path / "dng-preview.jpg"
    path.write_bytes(lossless_jpeg(natural(rng, 192, 256, 1)))
    done = subprocess.run([sys.executable, "-c", INSPECT, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["jpeg", "L", "None", "[]"]


def test_a_lossless_jpeg_is_valid_and_its_damage_is_found(
    tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator
) -> None:
    write("scan.jpg", lossless_jpeg(natural(rng, 192, 256, 1)))
    write("cut.jpg", lossless_jpeg(natural(rng, 192, 256, 1))[:20_000])
    good = lossless_jpeg(natural(rng, 192, 256, 1))
    middle = len(good) // 2
    write("zeroed.jpg", good[:middle] + bytes(16) + good[middle + 16 :])
    report = scan_dir(tmp_path, workers=1)
    corrupt = finding(report, "I003")
    assert [loc.path for loc in corrupt.locations] == ["cut.jpg"]
    assert corrupt.locations[0].detail.startswith("truncated: no end-of-image marker")
    damaged = finding(report, "I004")
    assert [loc.path for loc in damaged.locations] == ["zeroed.jpg"]
    assert damaged.locations[0].detail.startswith("Corrupt JPEG data: bad Huffman code")
    assert report.info["decoder.jpeg"].startswith("libjpeg-turbo")


def test_damage_in_a_lossless_colour_jpeg_is_found(
    tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator
) -> None:
    # libjpeg-turbo converts no colours in a lossless frame: the gray decode that judges other JPEGs refused an
    # RGB one ("Unsupported color conversion request"), Pillow judged it and reported no damage, and a cut
    # file was "Unsupported color conversion request".
    good = lossless_jpeg(natural(rng, 64, 96, 3))
    middle = len(good) // 2
    write("ok.jpg", good)
    write("cut.jpg", good[:middle])
    write("zeroed.jpg", good[:middle] + bytes(32) + good[middle + 32 :])
    write("flat.jpg", lossless_jpeg(np.full((40, 40, 3), (10, 20, 30), np.uint8)))
    report = scan_dir(tmp_path, workers=1)
    corrupt = finding(report, "I003")
    assert [loc.path for loc in corrupt.locations] == ["cut.jpg"]
    assert (corrupt.locations[0].detail or "").startswith("truncated: no end-of-image marker (libjpeg: Premature end")
    damaged = finding(report, "I004")
    assert [loc.path for loc in damaged.locations] == ["zeroed.jpg"]
    assert (damaged.locations[0].detail or "").startswith("Corrupt JPEG data")
    constant = finding(report, "I008")
    flat = [(loc.path, loc.detail) for loc in constant.locations]
    assert flat == [("flat.jpg", "every pixel is (10, 20, 30) (40×40)")]
    assert report.info["decoder.jpeg"].startswith("libjpeg-turbo") and "decoder.jpeg.fallback" not in report.info


def test_a_lossless_ycbcr_jpeg_that_libjpeg_turbo_cannot_convert_is_judged_by_pillow(
    rng: np.random.Generator,
) -> None:
    # No colour conversion in a lossless frame: neither libjpeg-turbo's interface nor Pillow decodes one that a
    # JFIF marker says is YCbCr. Pillow's reason stands, credited to Pillow (it was credited to libjpeg-turbo).
    plain = lossless_jpeg(natural(rng, 32, 48, 3), ids=b"\x01\x02\x03")
    data = plain[:2] + _segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00") + plain[2:]
    with pytest.raises(OSError):
        Image.open(io.BytesIO(data)).load()
    v = inspect_image(data, "scan.jpg")
    assert v.error is not None and "color conversion" not in v.error
    assert judge_label(v).startswith("Pillow ")


def test_an_avif_whose_major_brand_is_heifs_generic_one_is_an_avif(rng: np.random.Generator) -> None:
    # libavif and other encoders write 'mif1' (or 'msf1' for sequences) as the major brand and 'avif' among the
    # compatible ones; Pillow reads such files as AVIF. They were judged HEIF: a false corrupt-image.
    avif = encode(Image.fromarray(natural(rng, 48, 64)), "AVIF")
    assert avif[8:12] == b"avif" and b"mif1" in avif[16:32]
    for brand in (b"mif1", b"msf1"):
        verdict = inspect_image(avif[:8] + brand + avif[12:], "photo.avif")
        assert (verdict.format, verdict.error, verdict.mode) == ("avif", None, "RGB")
    heic = struct.pack(">I", 24) + b"ftypmif1\x00\x00\x00\x00mif1heic" + bytes(100)
    assert inspect_image(heic, "photo.heic").format == "heif"


SVG_REASON = "SVG is a vector format: it must be rendered, not decoded"


def test_svgs_saved_as_images_are_named_whatever_comes_before_the_svg_element(
    tmp_path: Path, write: Callable[[str, bytes], Path]
) -> None:
    # logos scraped from the web: an SVG saved as .png is a web page to a loader. Only '<svg ' at the very start,
    # or '<svg' in the first 64 bytes after an XML declaration, was recognised; the rest read 'content is text',
    # 'XML' or 'unknown binary data'.
    element = b'<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24"><path d="M0 0h24v24H0z"/></svg>\n'
    prologue = b'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
    doctype = b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
    comment = b"<!-- Generator: Adobe Illustrator 24.0.0, SVG Export Plug-In . SVG Version: 6.00 Build 0) -->\n"
    variants = {
        "plain.png": element,
        "newline.png": element.replace(b"<svg ", b"<svg\n  "),
        "bom.png": b"\xef\xbb\xbf" + element,
        "prologue.png": prologue + comment + doctype + element,
        "upper.jpg": element.replace(b"<svg", b"<SVG"),
    }
    for name, data in variants.items():
        write(name, data)
    write("page.jpg", b"<?xml version='1.0'?>\n<html><body>" + element + b"</body></html>")
    write("bom.jpg", b"\xef\xbb\xbfnot found\n")
    report = scan_dir(tmp_path, workers=1)
    corrupt = finding(report, "I003")
    assert sorted((loc.path, loc.detail.split(" [")[0]) for loc in corrupt.locations) == sorted(
        (name, SVG_REASON) for name in variants
    )
    not_images = {loc.path: loc.detail for loc in finding(report, "I002").locations}
    assert not_images["bom.jpg"] == "content is text"
    assert not_images["page.jpg"].startswith("content is HTML")  # an SVG inside a page is no SVG file


def test_a_page_of_many_comments_and_no_svg_element_is_told_at_once() -> None:
    """The SVG prologue's pattern let a comment run on through the comments after it: with no ``<svg`` after
    26 comments (244 bytes of an HTML page saved as .jpg) the backtracking took 30 s, with 40 it never ended,
    and the reader was killed as hung. Run apart, so that a return of it fails here instead of hanging."""
    code = (
        "from scanner_service.imaging.sniff import sniff\n"
        "for head in (b'<!--a-->' * 60, b'<!DOCTYPE a [x]>' * 60, b'<!-- a -- b --><!---->' * 30 + b'<svg>'):\n"
        "    print(sniff(head))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["None", "None", "svg"]


def test_camera_raw_files_are_named_as_such(tmp_path: Path, write: Callable[[str, bytes], Path]) -> None:
    raws = {
        "IMG_0001.jpg": (struct.pack(">I", 24) + b"ftypcrx \x00\x00\x00\x01crx isom", "Canon CR3"),
        "P1010001.jpg": (b"IIRO\x08\x00\x00\x00", "Olympus ORF"),
        "P1000001.jpg": (b"IIU\x00\x18\x00\x00\x00", "Panasonic RW2"),
        "DSCF0001.jpg": (b"FUJIFILMCCD-RAW 0201FF383501", "Fujifilm RAF"),
        "CRW_0001.jpg": (b"II\x1a\x00\x00\x00HEAPCCDR", "Canon CRW"),
    }
    for name, (head, _) in raws.items():
        write(name, head + bytes(range(256)) * 4)
    report = scan_dir(tmp_path, workers=1)
    assert codes(report) == {"I002"}
    details = {loc.path: loc.detail for loc in finding(report, "I002").locations}
    assert details == {
        name: f"content is a camera raw file ({what}), which no image loader decodes: convert it to JPEG or PNG"
        for name, (_, what) in raws.items()
    }


def _lines(report: Report, code: str) -> list[tuple[str, int | None, str]]:
    found = finding(report, code)
    return [(loc.path, loc.line, loc.detail.split(" [")[0]) for loc in found.locations] if found else []


def test_a_csv_without_a_header_is_read_from_its_first_line(
    tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator
) -> None:
    # df.to_csv(header=False): the first row was taken for the header, so its image was never inspected (an
    # HTML page here, exit status 0) and the labels of the other rows were dropped without a word
    write("img/0.jpg", b"<html><body>403 Forbidden</body></html>")
    for i in range(1, 4):
        write(f"img/{i}.jpg", encode(Image.fromarray(natural(rng, 40, 40)), "JPEG"))
    write("train.csv", b"img/0.jpg,0\nimg/1.jpg,1\nimg/2.jpg,-1\nimg/3.jpg,1\n")
    report = scan_dir(tmp_path / "train.csv", workers=1)
    assert report.summary.items_scanned == 4
    assert _lines(report, "I002")[0][:2] == ("img/0.jpg", 1)
    assert _lines(report, "L002") == [("img/2.jpg", 3, "negative label -1")]
    assert (
        report.info["images.list"] == "train.csv has no header: line 1 is a row (paths in column 1, labels in column 2)"
    )
    # class names beside the paths are the labels; a header naming its columns is still a header
    write("names.csv", b"img/1.jpg,cat\nimg/2.jpg,dog\nimg/3.jpg,cat\n")
    named = scan_dir(tmp_path / "names.csv", workers=1)
    assert named.summary.items_scanned == 3
    assert [[(row.name, row.count) for row in table.histogram] for table in named.labels] == [[("cat", 2), ("dog", 1)]]
    write("header.csv", b"path,label\nimg/1.jpg,0\nimg/2.jpg,1\n")
    headed = scan_dir(tmp_path / "header.csv", workers=1)
    assert headed.summary.items_scanned == 2 and "images.list" not in headed.info


def test_a_txt_list_separated_by_commas_is_read_as_such(
    tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator
) -> None:
    # 'path,label' lines in a .txt (a CSV without a header under another name): dscan refused the file as no
    # dataset (exit status 2), though it names images and their labels as plainly as a tab list does
    write("img/0.jpg", b"")
    for i in range(1, 4):
        write(f"img/{i}.jpg", encode(Image.fromarray(natural(rng, 40, 40)), "JPEG"))
    write("train.txt", b"img/0.jpg,0\nimg/1.jpg,1\nimg/9.jpg,1\nimg/2.jpg,-1\nimg/3.jpg,1\n")
    report = scan_dir(tmp_path / "train.txt", workers=1)
    assert report.source.kind == "image-list"
    assert report.summary.items_scanned == 4
    assert _lines(report, "I001") == [("img/0.jpg", 1, "0 bytes")]
    assert _lines(report, "S004") == [("train.txt", 3, "img/9.jpg does not exist")]
    assert _lines(report, "L002") == [("img/2.jpg", 4, "negative label -1")]
    assert "S005" not in codes(report)


def test_a_list_written_on_windows_says_so_where_its_files_are_missing(
    tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator
) -> None:
    write("img/cat/0.jpg", encode(Image.fromarray(natural(rng, 40, 40)), "JPEG"))
    write("train.txt", b"img\\cat\\0.jpg 0\r\nimg\\cat\\1.jpg 1\r\n")
    report = scan_dir(tmp_path / "train.txt", workers=1)
    assert _lines(report, "S004") == [
        (
            "train.txt",
            1,
            "img\\cat\\0.jpg does not exist (img/cat/0.jpg does: the list was written with Windows separators)",
        ),
        ("train.txt", 2, "img\\cat\\1.jpg does not exist"),
    ]


def test_what_phones_append_to_their_jpegs_is_named(rng: np.random.Generator) -> None:
    # a motion photo (the clip after the JPEG's end) and Samsung's metadata trailer read 'unknown data'
    photo = encode(Image.fromarray(natural(rng, 48, 64)), "JPEG")
    clip = struct.pack(">I", 24) + b"ftypmp42\x00\x00\x00\x00mp42isom" + struct.pack(">I", 8) + b"free" + bytes(64)
    motion = inspect_image(photo + clip, "PXL_20240101_120000000.MP.jpg")
    assert (motion.error, motion.trailing) == (None, len(clip))
    assert motion.trailing_what == "an MP4 video (a phone's motion photo? Loaders read only the image before it)"
    samsung = inspect_image(photo + b"\x00\x00Image_UTC_Data1700000000000SEFH" + bytes(20) + b"SEFT", "2024.jpg")
    assert samsung.trailing_what == "Samsung camera metadata (an SEFH/SEFT trailer)"
