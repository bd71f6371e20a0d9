"""Encoded images by their magic bytes (record values carry no file name to go by)."""

from __future__ import annotations

SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\xff\xd8\xff", "jpeg"),
    (0, b"\x89PNG\r\n\x1a\n", "png"),
    (0, b"GIF87a", "gif"),
    (0, b"GIF89a", "gif"),
    (0, b"BM", "bmp"),
    (0, b"II*\x00", "tiff"),
    (0, b"MM\x00*", "tiff"),
    (8, b"WEBP", "webp"),
    (0, b"\x00\x00\x00\x0cjP  \r\n\x87\n", "jpeg2000"),
    (0, b"\xff\x4f\xff\x51", "jpeg2000"),
)


def image_format(value: bytes | memoryview) -> str | None:
    """``jpeg``, ``png``, ... when ``value`` starts like an encoded image, else None."""
    head = bytes(value[:16])
    for offset, magic, name in SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            if name == "webp" and head[:4] != b"RIFF":
                continue
            return name
    return None
