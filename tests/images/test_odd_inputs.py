"""Image inputs found in the wild: names that are not UTF-8, list files with a byte-order mark or a stray
NUL byte, and a stray marker inside JPEG data (damaged, not truncated)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
from imagetools import codes, finding, jpeg, places, scan_dir, scan_start

from tests.conftest import cli_json

Write = Callable[[str, bytes], Path]


def test_a_file_name_that_is_not_utf8_is_reported_in_json(tmp_path: Path, rng: np.random.Generator) -> None:
    folder = tmp_path / "imgs"
    folder.mkdir()
    good = jpeg(rng)
    (folder / "ok.jpg").write_bytes(good)
    (folder / os.fsdecode(b"trunc\xfe.jpg")).write_bytes(good[: len(good) // 2])
    status, report = cli_json(folder)
    assert status == 1
    corrupt = next(f for f in report["findings"] if f["code"] == "I003")
    assert [loc["path"] for loc in corrupt["locations"]] == ["trunc\\xfe.jpg"]


def test_a_stray_marker_inside_jpeg_data_is_damage_not_truncation(write: Write, rng: np.random.Generator) -> None:
    data = jpeg(rng, 192, 256)
    at = scan_start(data) + (len(data) - scan_start(data)) // 2
    damaged = data[:at] + b"\xff\xfe" + data[at:]  # a COM marker where entropy-coded data belongs
    folder = write("imgs/stray.jpg", damaged).parent
    write("imgs/ok.jpg", data)
    report = scan_dir(folder)
    assert "I003" not in codes(report)  # the end-of-image marker is there: no "truncated" error
    warned = finding(report, "I004")
    assert warned is not None and [loc.path for loc in warned.locations] == ["stray.jpg"]


def test_image_list_with_a_bom_and_a_nul_byte(write: Write, rng: np.random.Generator) -> None:
    write("imgs/a.jpg", jpeg(rng))
    write("imgs/b.jpg", jpeg(rng))
    listing = write("imgs/train.txt", b"\xef\xbb\xbfa.jpg 0\nb\0.jpg 1\nb.jpg 1\n")
    report = scan_dir(listing)
    assert codes(report) == {"S005"}  # no missing-file for the first line: the BOM is not part of its path
    bad = finding(report, "S005")
    assert [(loc.line, "NUL" in (loc.detail or "")) for loc in bad.locations] == [(2, True)]
    assert report.summary.items_scanned == 2


def test_a_named_pipe_in_a_folder_is_never_opened_and_reported_when_named_as_an_image(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    # torchvision's ImageFolder lists every file with an image extension, a named pipe too, and its open then
    # blocks until a writer comes: forever. One named as an image was an info note only (exit status 0).
    folder = tmp_path / "imgs"
    (folder / "cls").mkdir(parents=True)
    (folder / "cls" / "a.jpg").write_bytes(jpeg(rng))
    os.mkfifo(folder / "cls" / "pipe.jpg")  # opening it would block until a writer comes: forever
    os.mkfifo(folder / "cls" / "pipe")  # no image extension: no loader lists it
    status, report = cli_json(folder)
    assert status == 1
    assert report["summary"]["items_scanned"] == 1
    assert "1 not a regular file" in report["info"]["images.skipped"]
    (refused,) = [f for f in report["findings"] if f["code"] == "S001"]
    assert [(loc["path"], loc["detail"]) for loc in refused["locations"]] == [
        (
            "cls/pipe.jpg",
            "a named pipe, socket or device named as an image: ImageFolder lists it, and opening it blocks or fails",
        )
    ]
    listing = folder / "cls" / "list.txt"
    listing.write_text("a.jpg 0\npipe.jpg 1\n")
    listed = scan_dir(listing)
    unreadable = finding(listed, "S001")
    assert [(loc.path, loc.detail) for loc in unreadable.locations] == [
        ("pipe.jpg", "not a regular file (a named pipe, socket or device)")
    ]


def test_list_labels_are_ascii_numbers(write: Write, rng: np.random.Generator) -> None:
    for name in ("a", "b", "c", "d"):
        write(f"imgs/{name}.jpg", jpeg(rng))
    listing = write("imgs/train.txt", "a.jpg 0\nb.jpg 1_0\nc.jpg \u0663\nd.jpg +1\n 1\n".encode())
    report = scan_dir(listing)
    bad = finding(report, "S005")
    assert [loc.line for loc in bad.locations] == [2, 3, 5]
    assert bad.locations[2].detail.startswith("no path before the label '1'")
    assert [row.label for row in report.labels[0].histogram] == [0, 1]


def _layered_psd(layers: list[tuple[int, int, int]], w: int = 8, h: int = 6) -> bytes:
    """A Photoshop file with RGB layers, as the PSD specification lays it out (raw channel data)."""
    import struct

    records, pixels = b"", b""
    for k, rgb in enumerate(layers):
        records += struct.pack(">iiiiH", 0, 0, h, w, 3)
        records += b"".join(struct.pack(">hI", ch, 2 + w * h) for ch in range(3))
        extra = struct.pack(">II", 0, 0) + bytes([1, 65 + k, 0, 0])  # no mask, no blending ranges; a name
        records += b"8BIMnorm" + bytes([255, 0, 0, 0]) + struct.pack(">I", len(extra)) + extra
        pixels += b"".join(struct.pack(">H", 0) + bytes([rgb[ch]]) * (w * h) for ch in range(3))
    info = struct.pack(">h", len(layers)) + records + pixels
    info += b"\x00" * (len(info) % 2)
    block = struct.pack(">I", len(info)) + info + struct.pack(">I", 0)
    head = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, h, w, 8, 3) + struct.pack(">II", 0, 0)
    merged = struct.pack(">H", 0) + bytes([10]) * (w * h) + bytes([20]) * (w * h) + bytes([30]) * (w * h)
    return head + struct.pack(">I", len(block)) + block + merged


def test_valid_16bit_big_endian_tiffs_and_layered_psds_are_no_errors(write: Write, rng: np.random.Generator) -> None:
    """Pillow computes no extrema for 16-bit big-endian ("I;16B") images, and numbers a PSD's layers from 1:
    both were false corrupt-image errors on valid files (microscopy and remote-sensing TIFFs are often "MM")."""
    import io

    from PIL import Image

    def tiff(pixels: np.ndarray) -> bytes:
        out = io.BytesIO()
        image = Image.frombytes("I;16B", pixels.shape[::-1], pixels.astype(">u2").tobytes())
        image.save(out, "TIFF")  # "MM", as Pillow writes it without libtiff
        return out.getvalue()

    varied = tiff(rng.integers(0, 65535, size=(40, 50)))
    assert Image.open(io.BytesIO(varied)).mode == "I;16B"
    write("imgs/varied.tif", varied)
    write("imgs/flat.tif", tiff(np.full((40, 50), 1234)))
    folder = write("imgs/layers.psd", _layered_psd([(200, 0, 0), (0, 200, 0), (0, 0, 200)])).parent
    with Image.open(folder / "layers.psd") as im:
        assert (im.format, im.n_frames) == ("PSD", 3)
    report = scan_dir(folder)
    assert not {"I002", "I003"} & codes(report)
    assert places(report, "I010") == ["flat.tif", "varied.tif"]  # 16-bit: unusual mode, nothing worse
    assert places(report, "I008") == ["flat.tif"]  # constant-image still judged on the pixels
    broken = _layered_psd([(200, 0, 0), (0, 200, 0)])
    write("bad/cut.psd", broken[: len(broken) - 200])
    assert places(scan_dir(folder.parent / "bad"), "I003") == ["cut.psd"]


def test_a_bomb_nested_in_an_icon_is_a_bomb_found_without_decoding(write: Write) -> None:
    """An ICO (or ICNS) icon holds PNG images that Pillow opens on its own: a small icon whose inner PNG
    declares gigapixels is a decompression bomb (it took gigabytes and seconds), not a corrupt file."""
    import struct
    import zlib

    from imagetools import chunk

    inner = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 65535, 65535, 8, 2, 0, 0, 0))
    inner += chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + chunk(b"IEND", b"")
    icon = struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", 0, 0, 0, 0, 1, 32, len(inner), 22) + inner
    folder = write("icons/favicon.ico", icon).parent
    report = scan_dir(folder)
    assert places(report, "I007") == ["favicon.ico"]
    assert finding(report, "I007").locations[0].detail.startswith("4,294,836,225 pixels declared (limit ")
    assert "I003" not in codes(report)
