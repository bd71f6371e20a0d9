"""Damaged strips in compressed TIFFs: libtiff prints its decoders' errors to standard error and Pillow
often decodes on. What libtiff prints while Pillow decodes is captured (never reaching the terminal) and
judged: a codec's decode errors are damage, notes on the directory are not.

What libtiff 4.7 reports, found by overwriting bytes in the middle of a strip (see the cases below): G4 fax
"Bad code word at line N of strip N" (Pillow decodes on: corrupt-image-data); LZW "Using code not yet in
table" or "LZWDecode: Not enough data at scanline N", Deflate "ZIPDecode: Decoding error at scanline N ..."
(Pillow fails: corrupt-image); PackBits nothing (it has no check that an overwrite trips; only a strip cut
short, "PackBitsDecode: Not enough data for scanline 0"; dscan's own unpacked-size check, in
test_images_gaps3, finds overwritten run headers, not overwritten pixel bytes).
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import encode, inspected_with_peak, natural
from PIL import Image, TiffImagePlugin

from scanner_service.imaging import inspect_image, tiff_log
from scanner_service.imaging.tiff_log import TiffLog
from tests.conftest import quiet_scan

Write = Callable[[str, bytes], Path]
DSCAN = Path(sys.executable).parent / "dscan"


def fax(rng: np.random.Generator, h: int = 128, w: int = 160) -> Image.Image:
    """A bilevel page with some structure (a G4 strip of a blank page is too short to damage)."""
    return Image.fromarray(natural(rng, h, w)[..., 0] > 128).convert("1")


def tiff(rng: np.random.Generator, compression: str, pages: int = 1) -> bytes:
    bilevel = compression in ("group4", "group3", "tiff_ccitt")
    images = [fax(rng) if bilevel else Image.fromarray(natural(rng, 128, 160)) for _ in range(pages)]
    return encode(images[0], "TIFF", compression=compression, save_all=True, append_images=images[1:])


def overwrite(data: bytes, fill: bytes, page: int = 0) -> bytes:
    """``data`` with ``fill`` written over the middle of ``page``'s first strip (offsets from tag 273)."""
    with Image.open(io.BytesIO(data)) as im:
        im.seek(page)
        start, size = im.tag_v2[273][0], im.tag_v2[279][0]
    at = start + size // 2
    return data[:at] + fill + data[at + len(fill) :]


# -- damaged strips ---------------------------------------------------------------------------------------


def test_a_damaged_g4_strip_that_pillow_decodes_is_damaged_data(
    rng: np.random.Generator, capfd: pytest.CaptureFixture[str]
) -> None:
    """Pillow hands over the fax page without a word; libtiff's messages become the finding, a few of them
    (one per bad line), and nothing reaches standard error."""
    v = inspect_image(overwrite(tiff(rng, "group4"), b"\xff" * 8), "fax.tif")
    assert v.error is None and v.usable and len(v.damage) == 1, v
    assert v.damage[0].startswith("libtiff: Fax4Decode: Bad code word at line "), v.damage
    assert "of strip 0" in v.damage[0] and v.damage[0].count("; ") <= 2
    assert capfd.readouterr().err == ""


def test_damage_on_a_later_page_names_the_page(rng: np.random.Generator, capfd: pytest.CaptureFixture[str]) -> None:
    data = tiff(rng, "group4", pages=3)
    assert inspect_image(data, "fax.tif").damage == []
    v = inspect_image(overwrite(data, b"\xff" * 8, page=1), "fax.tif")
    assert v.error is None and v.frames == 3 and len(v.damage) == 1, v
    assert v.damage[0].startswith("page 1, libtiff: Fax4Decode: Bad code word"), v.damage
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("compression", "fill", "reason"),
    [
        ("tiff_lzw", b"\xff" * 8, "decoder error -2; libtiff: Using code not yet in table"),
        ("tiff_lzw", bytes(64), "decoder error -2; libtiff: LZWDecode: Not enough data at scanline 0 (short "),
        ("tiff_adobe_deflate", b"\xff" * 8, "decoder error -2; libtiff: ZIPDecode: Decoding error at scanline 0, "),
    ],
    ids=["lzw-ff", "lzw-zeros", "deflate-ff"],
)
def test_a_damaged_strip_pillow_fails_on_gets_libtiffs_reason(
    rng: np.random.Generator, capfd: pytest.CaptureFixture[str], compression: str, fill: bytes, reason: str
) -> None:
    """Pillow's own reason is a bare 'decoder error -2': libtiff's message says what broke."""
    v = inspect_image(overwrite(tiff(rng, compression), fill), "a.tif")
    assert v.error is not None and v.error.startswith(reason), v.error
    assert capfd.readouterr().err == ""


def test_a_failing_later_page_names_the_page(rng: np.random.Generator) -> None:
    v = inspect_image(overwrite(tiff(rng, "tiff_adobe_deflate", pages=2), b"\xff" * 8, page=1), "a.tif")
    assert v.error is not None and v.error.startswith("decoder error -2; page 1, libtiff: ZIPDecode: "), v.error


def test_packbits_has_no_check_an_overwrite_trips_only_a_strip_cut_short(rng: np.random.Generator) -> None:
    """PackBits carries no check: libtiff decodes overwritten runs into wrong pixels without a word (no
    finding is made up for them); a strip whose byte count is cut short runs out of data, and says so."""
    data = tiff(rng, "packbits")
    for fill in (bytes(64), b"\xff" * 64, b"\x80" * 64):
        v = inspect_image(overwrite(data, fill), "p.tif")
        assert (v.error, v.damage) == (None, []), v
    with Image.open(io.BytesIO(data)) as im:
        count = im.tag_v2[279][0]
    at = data.rindex(struct.pack("<I", count))  # the StripByteCounts value in the directory
    short = data[:at] + struct.pack("<I", count // 2) + data[at + 4 :]
    v = inspect_image(short, "p.tif")
    assert v.error == "decoder error -2; libtiff: PackBitsDecode: Not enough data for scanline 0", v.error


def test_a_jpeg_page_libjpeg_aborts_is_damaged_data(rng: np.random.Generator) -> None:
    """libjpeg's errors inside libtiff ('Unsupported marker type') stop the strip; Pillow decodes on and
    strict libjpeg-turbo refuses the stream outright, which the strip check leaves to Pillow."""
    v = inspect_image(overwrite(tiff(rng, "jpeg"), b"\xff" * 8), "j.tif")
    assert v.error is None and len(v.damage) == 1, v
    assert v.damage[0].startswith("libtiff: JPEGLib: "), v.damage


@pytest.mark.parametrize("fill", [bytes(16), bytes(1024)], ids=["16-zeros", "1k-zeros"])
def test_a_damaged_deflate_strip_libtiff_decodes_is_damaged_data(
    rng: np.random.Generator, capfd: pytest.CaptureFixture[str], fill: bytes
) -> None:
    """libtiff inflates a Deflate strip only until its rows are filled and never reads the Adler-32 at the end
    of the stream: zeroed bytes in the middle decode into wrong rows without a word (about half of random
    overwrites passed). The strip, inflated to its end, says it."""
    v = inspect_image(overwrite(tiff(rng, "tiff_adobe_deflate"), fill), "d.tif")
    assert v.error is None and v.damage == ["strip 0: Deflate data damaged (zlib: incorrect data check)"], v
    assert capfd.readouterr().err == ""


def test_a_damaged_deflate_strip_on_a_later_page_names_the_page(rng: np.random.Generator) -> None:
    v = inspect_image(overwrite(tiff(rng, "tiff_adobe_deflate", pages=2), bytes(1024), page=1), "d.tif")
    assert v.error is None and v.damage == ["page 1, strip 0: Deflate data damaged (zlib: incorrect data check)"]


def test_a_deflate_strip_whose_stream_runs_past_its_end_is_damaged_data(rng: np.random.Generator) -> None:
    """A strip cut short after its last row's data (here: its byte count 4 short, the Adler-32 outside) decodes
    in full, but its stream does not end where the strip does: damage that derailed the codes looks so."""
    data = tiff(rng, "tiff_adobe_deflate")
    with Image.open(io.BytesIO(data)) as im:
        count = im.tag_v2[279][0]
    at = data.rindex(struct.pack("<I", count))  # the StripByteCounts value in the directory
    v = inspect_image(data[:at] + struct.pack("<I", count - 4) + data[at + 4 :], "d.tif")
    assert v.error is None, v
    assert v.damage == [
        f"strip 0: Deflate data damaged (zlib: the stream does not end within the strip's {count - 4:,} bytes)"
    ]


def test_a_damaged_deflate_strip_is_corrupt_image_data_in_the_report(rng: np.random.Generator, write: Write) -> None:
    write("data/ok.tif", tiff(rng, "tiff_adobe_deflate"))
    write("data/bad.tif", overwrite(tiff(rng, "tiff_adobe_deflate"), bytes(64)))
    out = subprocess.run(
        [str(DSCAN), "scan", str(write("data/.keep", b"").parent), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = {(f["name"], loc["path"]) for f in json.loads(out.stdout)["findings"] for loc in f["locations"]}
    assert ("corrupt-image-data", "bad.tif") in found and not any(p == "ok.tif" for _, p in found), found


def test_a_directory_that_links_back_is_an_ifd_loop_that_loses_pages(rng: np.random.Generator) -> None:
    """Page 1's next-directory link points back at page 0's directory: Pillow takes the loop for the end and
    reads two pages of three without a word (page 2 is lost); libtiff reports the loop."""
    data = tiff(rng, "tiff_lzw", pages=3)
    assert inspect_image(data, "a.tif").damage == []

    def link_of(directory: int) -> int:  # where a directory keeps the offset of the next one
        return directory + 2 + 12 * struct.unpack("<H", data[directory : directory + 2])[0]

    first = struct.unpack("<I", data[4:8])[0]
    second = struct.unpack("<I", data[link_of(first) : link_of(first) + 4])[0]
    at = link_of(second)
    v = inspect_image(data[:at] + struct.pack("<I", first) + data[at + 4 :], "a.tif")
    assert v.error is None and v.frames == 2, v
    assert v.damage == [
        "the directory of page 1 links back to page 0's (an IFD loop: Pillow stops there after 2 pages; pages the"
        " link skips are lost)"
    ]


def test_a_directory_cut_short_or_overwritten_is_no_ifd_loop(rng: np.random.Generator) -> None:
    """Pillow keeps a directory's own offset as the link to the next one when it cannot read the link: a file
    cut inside its last directory's link, or a directory overwritten, was "links back to page 0's (an IFD
    loop)". The link is read from the file: there is no loop, the directory is damaged."""
    single = tiff(rng, "group4", pages=1)
    directory = struct.unpack("<I", single[4:8])[0]
    entries = struct.unpack("<H", single[directory : directory + 2])[0]
    assert directory + 2 + 12 * entries + 4 == len(single)  # (the directory is the file's last part)
    v = inspect_image(single[:-1], "a.tif")
    assert v.error is None and v.frames == 1, v
    assert v.damage[0] == (
        "the directory of page 0 is cut short: the file ends inside its link to the next directory (Pillow stops"
        " there after 1 page; any pages after it are lost)"
    )
    data = tiff(rng, "raw", pages=4)
    offsets = [struct.unpack("<I", data[4:8])[0]]
    for _ in range(3):
        at = offsets[-1] + 2 + 12 * struct.unpack("<H", data[offsets[-1] : offsets[-1] + 2])[0]
        offsets.append(struct.unpack("<I", data[at : at + 4])[0])
    third = offsets[2]
    v = inspect_image(data[:third] + b"\xff" * 16 + data[third + 16 :], "a.tif")
    assert v.frames == 3, v
    assert v.damage[0] == (
        "the directory of page 2 is damaged or cut short: its 65,535 entries run past the end of the file (Pillow"
        " stops there after 3 pages; any pages after it are lost)"
    ), v.damage
    assert not any("loop" in d for d in v.damage)


# -- valid files stay clean and quiet -------------------------------------------------------------------


COMPRESSIONS = ["raw", "group4", "group3", "tiff_ccitt", "tiff_lzw", "tiff_adobe_deflate", "packbits", "jpeg"]


@pytest.mark.parametrize("compression", [*COMPRESSIONS, "lzma", "zstd"])
def test_valid_tiffs_stay_clean_and_quiet(
    rng: np.random.Generator, capfd: pytest.CaptureFixture[str], compression: str
) -> None:
    try:
        data = tiff(rng, compression, pages=2)
    except (OSError, ValueError) as exc:  # a codec this libtiff was built without
        pytest.skip(f"{compression}: {exc}")
    capfd.readouterr()
    v = inspect_image(data, "ok.tif")
    assert (v.error, v.damage, v.frames) == (None, [], 2), v
    assert capfd.readouterr().err == ""


def test_unknown_tags_are_no_damage(rng: np.random.Generator, capfd: pytest.CaptureFixture[str]) -> None:
    info = TiffImagePlugin.ImageFileDirectory_v2()
    info[50001], info[50002] = "private", 7
    out = io.BytesIO()
    Image.fromarray(natural(rng, 64, 80)).save(out, "TIFF", compression="tiff_lzw", tiffinfo=info)
    capfd.readouterr()
    v = inspect_image(out.getvalue(), "tags.tif")
    assert (v.error, v.damage) == (None, []), v
    assert capfd.readouterr().err == ""


def test_libtiff_lines_are_sorted_into_damage_and_notes() -> None:
    damage, other = tiff_log.sort(
        [
            "TIFFReadDirectory: Warning, Unknown field with tag 50001 (0xc351) encountered",
            "TIFFReadDirectory: Unknown field with tag 50001 (0xc351) encountered",
            "Fax4Decode: Bad code word at line 12 of strip 0 (x 100)",
            "Fax4Decode: Bad code word at line 12 of strip 0 (x 100)",
            "LZWDecode: Corrupted LZW table at scanline 3",
            "_tiffReadProc: Invalid Read at loc 3309, eof: 2529",
            "WEBP compression support is not configured",
        ]
    )
    assert damage == [
        "Fax4Decode: Bad code word at line 12 of strip 0 (x 100)",
        "LZWDecode: Corrupted LZW table at scanline 3",
        "_tiffReadProc: Invalid Read at loc 3309, eof: 2529",
    ]
    assert other == ["WEBP compression support is not configured"]
    assert tiff_log.text([f"m{i}" for i in range(5)]) == "libtiff: m0; m1; m2 (and 2 more)"


# -- descriptor 2 ---------------------------------------------------------------------------------------


def _fd2() -> tuple[int, int]:
    st = os.fstat(2)
    return st.st_dev, st.st_ino


def test_descriptor_2_is_restored_even_when_the_decode_raises(capfd: pytest.CaptureFixture[str]) -> None:
    before = _fd2()
    with pytest.raises(RuntimeError), TiffLog() as log:
        os.write(2, b"LZWDecode: Not enough data at scanline 0 (short 1 bytes).\n")
        assert log.take() == ["LZWDecode: Not enough data at scanline 0 (short 1 bytes)"]
        raise RuntimeError("decoder")
    assert _fd2() == before
    assert capfd.readouterr().err == ""


def test_other_writes_in_the_window_reach_standard_error(capfd: pytest.CaptureFixture[str]) -> None:
    """In one process with threads (-j0 beside a progress bar) another thread may write meanwhile: what is
    not shaped as libtiff's messages is written back to standard error."""
    with TiffLog() as log:
        os.write(2, b"\x1b[2K progress 50%\nFax4Decode: Bad code word at line 1 of strip 0 (x 0).\n")
        assert log.take() == ["Fax4Decode: Bad code word at line 1 of strip 0 (x 0)"]
        os.write(2, b"written last\n")
    assert capfd.readouterr().err == "\x1b[2K progress 50%\nwritten last\n"


# -- the CLI ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_scan_prints_no_libtiff_line(tmp_path: Path, write: Write, rng: np.random.Generator, workers: str) -> None:
    """libtiff's messages went straight to dscan's standard error, in the middle of the report."""
    write("data/fax.tif", overwrite(tiff(rng, "group4"), b"\xff" * 8))
    write("data/lzw.tif", overwrite(tiff(rng, "tiff_lzw"), b"\xff" * 8))
    write("data/ok.tif", tiff(rng, "tiff_adobe_deflate"))
    status, report = quiet_scan(tmp_path / "data", "-j", workers)
    assert status == 1
    found = {(f["name"], at["path"], at["detail"]) for f in report["findings"] for at in f["locations"]}
    assert {(name, path) for name, path, _ in found} == {
        ("corrupt-image-data", "fax.tif"),
        ("corrupt-image", "lzw.tif"),
    }
    assert all("libtiff: " in detail for _, _, detail in found), found


def test_a_pillow_warning_repeated_on_every_page_is_named_once() -> None:
    """Pillow warns 'Tag data larger than file' each time it reads a directory (14 times for 3 pages): the
    damage named it 14 times, since the check for a repeat compared the message without its 'Pillow: '."""

    from PIL import TiffImagePlugin

    frames = [Image.fromarray(np.full((8, 8), i * 40, np.uint8)) for i in range(3)]
    info = TiffImagePlugin.ImageFileDirectory_v2()
    info[65000] = b"x" * 20
    info.tagtype[65000] = 7  # UNDEFINED: stored at an offset, its count patched below
    out = io.BytesIO()
    frames[0].save(out, "TIFF", save_all=True, append_images=frames[1:], tiffinfo=info)
    data = bytearray(out.getvalue())
    entry = struct.pack("<HH", 65000, 7)
    at = data.find(entry)
    while at >= 0:
        data[at + 4 : at + 8] = struct.pack("<I", 10**6)  # more data than the file holds
        at = data.find(entry, at + 1)
    verdict = inspect_image(bytes(data), "a.tif")
    assert verdict.damage == ["Pillow: Tag data larger than file. Skipping tag 65000"], verdict.damage


def _jpeg_tables_typed(data: bytes, field_type: int, value: int | None = None) -> bytes:
    """``data`` (a JPEG-compressed TIFF) with its JPEGTables tag's type set to ``field_type`` (one value)."""
    out = bytearray(data)
    ifd = struct.unpack_from("<I", out, 4)[0]
    (count,) = struct.unpack_from("<H", out, ifd)
    entry = next(ifd + 2 + 12 * i for i in range(count) if struct.unpack_from("<H", out, ifd + 2 + 12 * i)[0] == 347)
    struct.pack_into("<H", out, entry + 2, field_type)
    if value is not None:
        struct.pack_into("<II", out, entry + 4, 1, value)
    return bytes(out)


def test_a_jpeg_tables_tag_of_another_type_is_no_error_of_dscan(rng: np.random.Generator) -> None:
    """A JPEGTables tag typed ASCII made the strip check raise ("string argument without an encoding"): a
    corrupt-image for a file Pillow loads. Typed LONG, ``bytes(n)`` allocated n bytes (libtiff then refuses
    the file: Pillow's error is the verdict)."""
    text = _jpeg_tables_typed(tiff(rng, "jpeg"), 2)
    with Image.open(io.BytesIO(text)) as im:
        im.load()
    verdict = inspect_image(text, "ascii.tif")
    assert verdict.error is None and verdict.format == "tiff", verdict.error
    verdict, peak = inspected_with_peak(_jpeg_tables_typed(tiff(rng, "jpeg"), 4, 2**30), "long.tif")
    assert verdict.judge == "pillow" and peak < 64 << 20, (verdict.error, peak)


def test_a_flaw_in_a_strip_check_leaves_pillows_verdict(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dscan's own strip checks run beside Pillow's decode and only add damage: one that raises on a tag it
    did not expect (as the JPEGTables check did) must leave the file as Pillow judged it, not corrupt."""
    from scanner_service.imaging import pillow

    def flawed(data: object, tags: object) -> str | None:
        raise TypeError("a tag of a type this check did not expect")

    monkeypatch.setattr(pillow, "deflate_damage", flawed)
    verdict = inspect_image(tiff(rng, "tiff_adobe_deflate"), "a.tif")
    assert verdict.format == "tiff" and verdict.error is None and verdict.damage == []


def test_a_zlib_bomb_in_strips_is_inflated_no_further_than_the_rows_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight strips of a 64×8 page pointing at one Deflate stream of 64 MB of zeros: the strip check inflated
    every strip to its end (seconds of CPU per file, where libtiff, and Pillow, stop at the rows' 512 bytes)."""
    import zlib

    from scanner_service.imaging import tiff_strips

    inflated = [0]
    original = zlib.decompressobj

    class Counting:
        def __init__(self) -> None:
            self.inner = original()

        def decompress(self, data: bytes, limit: int) -> bytes:
            out = self.inner.decompress(data, limit)
            inflated[0] += len(out)
            return out

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    monkeypatch.setattr(tiff_strips.zlib, "decompressobj", Counting)
    bomb = zlib.compress(bytes(64 << 20), 9)
    data = b"\0" * 8 + bomb
    tags = {259: 8, 256: 64, 257: 8, 258: (8,), 277: 1, 278: 1, 273: (8,) * 8, 279: (len(bomb),) * 8}
    assert tiff_strips.deflate_damage(data, tags) is None
    assert inflated[0] <= 2 * tiff_strips.STEP + 512, f"{inflated[0]:,} bytes inflated"
