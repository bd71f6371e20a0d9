"""Image builders for the image tests: real files, written by Pillow or by a small PNG encoder here.

Pillow cannot write interlaced PNGs or every bit depth, so ``png_bytes`` encodes PNGs itself (every colour
type, bit depths 1-16, Adam7); a test checks its output against Pillow's decoder.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from scanner_service import Report, ScanConfig, scan

ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def chunk(ctype: bytes, body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + ctype + body + zlib.crc32(ctype + body).to_bytes(4, "big")


def _pack_rows(pixels: np.ndarray, depth: int) -> list[bytes]:
    """Rows of ``pixels`` (H, W, C) as PNG scanlines without the filter byte."""
    h = pixels.shape[0]
    flat = pixels.reshape(h, -1)
    if depth == 16:
        return [row.astype(">u2").tobytes() for row in flat]
    if depth == 8:
        return [row.astype(np.uint8).tobytes() for row in flat]
    per = 8 // depth
    out = []
    for row in flat.astype(np.uint8):
        pad = (-len(row)) % per
        row = np.concatenate([row, np.zeros(pad, np.uint8)]).reshape(-1, per)
        shifts = np.arange(per - 1, -1, -1, dtype=np.uint8) * depth
        out.append((row << shifts).sum(axis=1).astype(np.uint8).tobytes())
    return out


def png_bytes(
    pixels: np.ndarray,
    colour: int,
    depth: int = 8,
    interlace: bool = False,
    palette: bytes | None = None,
    trns: bytes | None = None,
    filter_type: int = 0,
    extra: tuple[bytes, ...] = (),
) -> bytes:
    """A PNG of ``pixels`` (H, W) or (H, W, C), filter ``filter_type`` on every row (0: none, 1: sub-free)."""
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    h, w, _ = pixels.shape
    raw = bytearray()
    passes = ADAM7 if interlace else ((0, 0, 1, 1),)
    for x0, y0, dx, dy in passes:
        sub = pixels[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        for row in _pack_rows(sub, depth):
            raw.append(filter_type)
            raw += row  # filter types 0..4 over zero-predicted data are left as they are: still a valid stream
    ihdr = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([depth, colour, 0, 0, int(interlace)])
    body = chunk(b"IHDR", ihdr)
    if palette is not None:
        body += chunk(b"PLTE", palette)
    if trns is not None:
        body += chunk(b"tRNS", trns)
    for c in extra:
        body += c
    body += chunk(b"IDAT", zlib.compress(bytes(raw), 6))
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


def natural(rng: np.random.Generator, h: int = 48, w: int = 64, channels: int = 3) -> np.ndarray:
    """A real-looking image: gradients plus noise (compresses like a photo, never constant)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    planes = [
        128 + 100 * np.sin(xx / rng.uniform(5, 15) + rng.uniform(0, 3)) * np.cos(yy / rng.uniform(5, 15))
        for _ in range(channels)
    ]
    img = np.stack(planes, -1) + rng.normal(0, 8, (h, w, channels))
    out = np.clip(img, 0, 255).astype(np.uint8)
    return out[:, :, 0] if channels == 1 else out


def encode(image: Image.Image, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def jpeg(rng: np.random.Generator, h: int = 96, w: int = 128, mode: str = "RGB", **options: Any) -> bytes:
    arr = natural(rng, h, w, 1 if mode == "L" else 3)
    image = Image.fromarray(arr)
    if mode not in ("L", "RGB"):
        image = image.convert(mode)
    return encode(image, "JPEG", quality=90, **options)


def png(rng: np.random.Generator, h: int = 48, w: int = 64, mode: str = "RGB") -> bytes:
    arr = natural(rng, h, w, 1 if mode == "L" else 3)
    image = Image.fromarray(arr)
    if mode not in ("L", "RGB"):
        image = image.convert(mode)
    return encode(image, "PNG")


def scan_start(data: bytes) -> int:
    """Offset of the first JPEG scan's entropy-coded data."""
    sos = data.index(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")


def zero_block(data: bytes, size: int = 2048, at: float = 0.5) -> bytes:
    """``size`` zero bytes in the middle of a JPEG's scan data (libjpeg warns, Pillow stays silent)."""
    start = scan_start(data)
    pos = start + int((len(data) - start - size - 2) * at)
    return data[:pos] + bytes(size) + data[pos + size :]


def scan_dir(path: Path, workers: int = 0, **options: Any) -> Report:
    return scan(path, ScanConfig(**options), workers=workers)


def finding(report: Report, code: str) -> Any:
    return next((f for f in report.findings if f.code == code), None)


def codes(report: Report) -> set[str]:
    return {f.code for f in report.findings}


def places(report: Report, code: str) -> list[str]:
    """The paths a finding names (empty when there is no such finding)."""
    f = finding(report, code)
    return [loc.path for loc in f.locations] if f else []


def inspected_with_peak(data: bytes, name: str) -> tuple[Any, int]:
    """``inspect_image(data, name)`` and the peak of the memory Python and numpy allocated meanwhile (bytes):
    what a crafted file's header makes the inspection allocate, where a bug once took gigabytes."""
    import tracemalloc

    from scanner_service.imaging import inspect_image

    tracemalloc.start()
    try:
        verdict = inspect_image(data, name)
        return verdict, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def pooled_scan(source: Any, path: Path, config: ScanConfig, monkeypatch: Any) -> Any:
    """Plan ``path`` with the source class ``source`` and read its shards in a real pool of two forked workers
    (the class registered under its ``kind`` so that they find it); the merged partial. Sources made to kill
    their reader test crash isolation: pytest's crash dumps are off meanwhile."""
    import faulthandler
    import multiprocessing as mp

    from scanner_service import merge
    from scanner_service.pool import ShardPool
    from scanner_service.sources import BY_KIND

    monkeypatch.setitem(BY_KIND, source.kind, source)
    planned = source(path, config).plan()
    pool = ShardPool(source.kind, str(path), config, workers=2)
    pool.ctx = mp.get_context("fork")  # the registry entry above must reach the workers
    faulthandler.disable()  # the killed workers' dumps would flood the output
    try:
        return merge([planned.partial, *pool.run(planned.shards)])
    finally:
        faulthandler.enable()
