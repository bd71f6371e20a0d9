"""Gaps a probe found: NaN on a later page of a float TIFF named the file only; a palette index beyond PLTE,
an out-of-range tRNS colour and an IEND chunk with a body passed a PNG scan (libpng warns on each)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from imagetools import chunk, encode, natural, png_bytes
from PIL import Image

from scanner_service.cli import main
from scanner_service.imaging import inspect_image
from scanner_service.imaging.verdict import on_pages

Write = Callable[[str, bytes], Path]


def scan_json(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """(path, detail) of every location of every finding, by code, as ``dscan scan FOLDER --format json`` says."""
    result = CliRunner().invoke(main, ["scan", str(folder), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.output)
    return {f["code"]: [(loc["path"], loc["detail"]) for loc in f["locations"]] for f in report["findings"]}


def float_tiff(pages: list[np.ndarray]) -> bytes:
    first, *rest = (Image.fromarray(p.astype(np.float32), "F") for p in pages)
    return encode(first, "TIFF", save_all=True, append_images=rest)


def loads(data: bytes) -> Image.Image:
    """Pillow (the loader) decodes the file without an error."""
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


# -- 1. NaN and Inf on a page after the first ---------------------------------------------------------------


def test_nan_and_inf_on_later_pages_of_a_float_tiff_name_the_page(tmp_path: Path, write: Write) -> None:
    clean = np.linspace(0, 1, 40 * 30, dtype=np.float32).reshape(40, 30)
    nan_page, both = clean.copy(), clean.copy()
    nan_page[3, 5] = np.nan
    both[7, 8] = np.inf
    both[1, 1] = both[2, 2] = np.nan
    write("nan_p2.tif", float_tiff([clean, nan_page, both]))
    write("single.tif", float_tiff([nan_page]))
    found = scan_json(tmp_path)
    assert found["V001"] == [
        ("nan_p2.tif", "page 1, 1 NaN pixel value; page 2, 2 NaN pixel values"),
        ("single.tif", "1 NaN pixel value"),  # one image: no page to name
    ]
    assert found["V002"] == [("nan_p2.tif", "page 2, 1 infinite pixel value")]


def test_nan_on_many_pages_names_the_first_three_and_counts_the_rest() -> None:
    pages = [np.zeros((8, 8), np.float32) for _ in range(6)]
    for page in (0, 2, 3, 4, 5):
        pages[page][page, 0] = np.nan
    v = inspect_image(float_tiff(pages), "stack.tif")
    assert (v.nan, v.nan_pages) == (5, ((0, 1), (2, 1), (3, 1), (4, 1), (5, 1)))
    assert on_pages(v.nan, v.nan_pages, "NaN") == (
        "page 0, 1 NaN pixel value; page 2, 1 NaN pixel value; page 3, 1 NaN pixel value;"
        " 2 more pages (5 NaN pixel values in all)"
    )


# -- 2. palette indices beyond the PLTE, tRNS colours beyond the bit depth --------------------------------

FOUR = bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
"""A 4-entry palette."""


def _indices(depth: int, bad: int, h: int = 20, w: int = 13) -> np.ndarray:
    """Indices 0-3 everywhere (a 4-entry palette holds them), ``bad`` at row 3, column 5 and row 9, column 0."""
    px = (np.arange(h * w).reshape(h, w) % 4).astype(np.uint8)
    px[3, 5] = px[9, 0] = bad
    return px


@pytest.mark.parametrize(
    ("depth", "interlace"),
    [(8, False), (4, False), (2, False), (8, True), (4, True)],
    ids=["8-bit", "4-bit", "2-bit-3-entries", "8-bit-interlaced", "4-bit-interlaced"],
)
def test_a_palette_index_beyond_plte_is_damaged_data(tmp_path: Path, write: Write, depth: int, interlace: bool) -> None:
    """Read from the unfiltered rows where every row has filter type 0, else from Pillow's decoded indices
    (interlaced files here); Pillow loads the file and gives the pixel an undefined colour."""
    palette, bad = (FOUR[:9], 3) if depth == 2 else (FOUR, 9)
    pixels = _indices(depth, bad)
    if depth == 2:
        pixels[pixels == 3] = 0  # a 3-entry palette: only index 3 at the two places is out of range
        pixels[3, 5] = pixels[9, 0] = 3
    data = png_bytes(pixels, 3, depth, interlace, palette=palette)
    assert np.array_equal(np.asarray(loads(data)), pixels)
    write("mask.png", data)
    entries = len(palette) // 3
    assert scan_json(tmp_path)["I004"] == [
        (
            "mask.png",
            f"IDAT: palette index {bad} beyond the {entries}-entry palette (row 3, column 5; 2 pixels out of range)"
            " [PNG structure check]",
        )
    ]


def test_a_palette_index_beyond_plte_behind_row_filters_is_found_by_the_decoded_indices() -> None:
    """Filtered rows (Sub here) are not read directly: the indices are the ones Pillow decodes."""
    pixels = np.zeros((6, 10), np.uint8)
    pixels[2, 4] = 9  # with Sub on every row, each pixel after it in its row decodes to index 9 too
    data = png_bytes(pixels, 3, 8, palette=FOUR, filter_type=1)
    decoded = np.asarray(loads(data))
    assert int(decoded[2, 4]) == 9 and int((decoded >= 4).sum()) == 6
    v = inspect_image(data, "mask.png")
    assert v.damage == ["IDAT: palette index 9 beyond the 4-entry palette (row 2, column 4; 6 pixels out of range)"]


@pytest.mark.parametrize(
    ("bits", "colours"), [(b, c) for b in (1, 2, 4, 8) for c in (2, 3, 5, 16, 200, 256) if c <= 1 << b]
)
def test_pillow_palette_pngs_with_short_palettes_stay_clean(rng: np.random.Generator, bits: int, colours: int) -> None:
    """Pillow writes the smallest palette that holds the colours, filtered rows below 8 bits: none is damage."""
    image = Image.fromarray(natural(rng, 37, 29)).quantize(colours)
    data = encode(image, "PNG", bits=bits)
    v = inspect_image(data, "q.png")
    assert (v.error, v.damage, v.mode) == (None, [], "P")


@pytest.mark.parametrize("depth", [1, 2, 4, 8])
@pytest.mark.parametrize("interlace", [False, True])
@pytest.mark.parametrize("filter_type", [0, 2])
def test_short_palettes_with_indices_inside_them_stay_clean(depth: int, interlace: bool, filter_type: int) -> None:
    entries = max(1, (1 << depth) - 1)
    pixels = (np.arange(15 * 11).reshape(15, 11) % entries).astype(np.uint8)
    if filter_type:  # Up, and zero differences below the first row: each row decodes to the first one
        pixels[1:] = 0
    palette = bytes(i % 256 for i in range(3 * entries))
    data = png_bytes(pixels, 3, depth, interlace, palette=palette, filter_type=filter_type)
    assert int(np.asarray(loads(data)).max()) < entries
    v = inspect_image(data, "p.png")
    assert (v.error, v.damage) == (None, [])


@pytest.mark.parametrize(
    ("colour", "depth", "trns", "shown"),
    [(0, 8, (300,), "grayscale value 300 outside 0-255"), (0, 4, (16,), "grayscale value 16 outside 0-15"),
     (2, 8, (0, 256, 7), "RGB value (0, 256, 7) outside 0-255")],
)  # fmt: skip
def test_a_trns_colour_beyond_the_bit_depth_is_damaged_data(
    colour: int, depth: int, trns: tuple[int, ...], shown: str
) -> None:
    pixels = (np.arange(12 * 9 * (3 if colour == 2 else 1)).reshape(12, 9, -1) % (1 << depth)).astype(np.uint8)
    data = png_bytes(pixels, colour, depth, trns=b"".join(t.to_bytes(2, "big") for t in trns))
    loads(data)
    v = inspect_image(data, "t.png")
    assert v.error is None
    assert v.damage == [f"tRNS chunk: transparent {shown} (the range of {depth}-bit samples)"]


@pytest.mark.parametrize(
    ("colour", "depth", "trns"), [(0, 1, (1,)), (0, 4, (15,)), (0, 8, (255,)), (0, 16, (65535,)), (2, 8, (255, 0, 9))]
)
def test_a_trns_colour_inside_the_bit_depth_stays_clean(colour: int, depth: int, trns: tuple[int, ...]) -> None:
    pixels = np.zeros((9, 7, 3 if colour == 2 else 1), np.uint16 if depth == 16 else np.uint8)
    pixels[0, 0] = 1
    data = png_bytes(pixels, colour, depth, trns=b"".join(t.to_bytes(2, "big") for t in trns))
    v = inspect_image(data, "t.png")
    assert (v.error, v.damage) == (None, [])


def test_pillow_transparent_pngs_stay_clean(rng: np.random.Generator) -> None:
    gray = Image.fromarray(natural(rng, 20, 20, 1))
    for image, transparency in ((gray, 255), (gray.convert("RGB"), (255, 0, 9)), (gray.convert("I;16"), 65535)):
        v = inspect_image(encode(image, "PNG", transparency=transparency), "t.png")
        assert (v.error, v.damage) == (None, []), image.mode


# -- 3. an IEND chunk with a body ---------------------------------------------------------------------------


def test_an_iend_chunk_with_a_body_is_damaged_data(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    good = encode(Image.fromarray(natural(rng, 40, 40)), "PNG")
    assert good.endswith(chunk(b"IEND", b""))
    damaged = good[:-12] + chunk(b"IEND", b"hello")
    loads(damaged)
    write("ok.png", good)
    write("iend.png", damaged)
    found = scan_json(tmp_path)
    assert found["I004"] == [("iend.png", "IEND chunk carries 5 bytes (the PNG spec says 0) [PNG structure check]")]
    assert "I006" not in found  # the body is the chunk's, not bytes after it
