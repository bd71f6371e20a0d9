"""Every image of an ICO (or CUR) file, not only the one Pillow loads.

Pillow opens an icon as its largest image and reads nothing else: an icon cut short (its last image, or the
directory's later entries, beyond the end of the file) or an image damaged inside it passes a ``load()``
whenever the largest image comes first and is whole. Another size (``im.size = (16, 16)``, or another
reader) then fails or reads garbage. So each entry of the directory is checked: it must lie inside the
file, and its image must decode, a PNG through the PNG structure check (Pillow's PNG reader checks no IDAT
CRC and no IEND), a BMP (a DIB and its AND mask) by Pillow.
"""

from __future__ import annotations

from typing import Any

from .verdict import Verdict

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def ico_damage(data: Any, icon: Any, verdict: Verdict, max_pixels: int) -> None:
    """Check every image of the icon file ``data`` that Pillow opened as ``icon`` (an ``IcoImageFile``): an entry
    beyond the end of the file, or an image that fails, is ``verdict.error``; damage an image's own check
    reports (a PNG's) is ``verdict.damage``, named by the entry. Entries are numbered as Pillow's
    ``icon.ico.frame(i)`` numbers them: the largest first, the one a ``load()`` reads."""
    n = len(data)
    judged: set[tuple[int, int]] = set()
    for index, entry in enumerate(icon.ico.entry):
        label = f"icon image {index} ({entry.width}×{entry.height})"
        end = entry.offset + entry.size
        if end > n:
            verdict.error = f"truncated: {label} needs bytes {entry.offset:,} to {end:,}, the file has {n:,}"
            return
        if (entry.offset, entry.size) in judged:  # entries that share one image (up to 65,535 of them) judged once
            continue
        judged.add((entry.offset, entry.size))
        part = data[entry.offset : end]
        if bytes(part[:8]) == PNG_SIGNATURE:
            if not _png(part, label, verdict, max_pixels):
                return
            continue
        try:
            icon.ico.frame(index).load()
        except Exception as exc:  # whatever Pillow raises on one image is the verdict on the file
            verdict.error = f"{label}: {str(exc).strip() or type(exc).__name__}"
            return


def _png(part: Any, label: str, verdict: Verdict, max_pixels: int) -> bool:
    """Judge one PNG image of an icon as a PNG file is judged; False when it is an error (or a bomb)."""
    from . import inspect_image  # (the package imports this module's caller lazily: no import cycle)

    png = inspect_image(part, "", max_pixels)
    if png.bomb is not None:
        verdict.bomb = f"{label}: {png.bomb}"
        return False
    if png.error is not None:
        verdict.error = f"{label}, a PNG: {png.error}"
        return False
    verdict.damage.extend(f"{label}, a PNG: {d}" for d in png.damage)
    return True
