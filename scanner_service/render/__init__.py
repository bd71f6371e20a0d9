"""Report renderers: text (terminal), json, junit, markdown. One module per format, imported when used."""

from __future__ import annotations

import importlib

from ..errors import UsageError
from ..report import Report

FORMATS = ("text", "json", "junit", "markdown")
MODULES = {"text": "text", "json": "json_format", "junit": "junit", "markdown": "markdown"}
MEDIA_TYPES = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
    "junit": "application/xml",
    "markdown": "text/markdown; charset=utf-8",
}


NOTES = (
    "config.file",
    "hdf5.not_scanned",
    "hdf5.images_not_scanned",
    "hdf5.other_formats",
    "hdf5.matlab",
    "hdf5.never_written",
    "hdf5.coordinates",
    "hdf5.per_sample",
    "numpy.not_scanned",
    "numpy.other_files",
    "numpy.fortran",
    "numpy.trailing",
    "images.list",
    "images.splits",
    "images.skipped",
    "images.labels",
    "lmdb.not_scanned",
    "lmdb.text_records",
    "lmdb.labels",
    "labels.none",
    "labels.option",
)
"""Report ``info`` entries every human-readable format shows: what the scan left out, and how to read its
indices, so that a pass is read right."""
NOTE_PREFIXES = ("lmdb.bookkeeping ", "lmdb.named_database ", "labels.onehot ", "labels.inferred ")
"""Report ``info`` entries, one per record, that are notes too."""


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def label_title(stream: str, path: str, dataset: str | None) -> str:
    """What a label table is named by: its file and dataset (``train.h5:/label``; two files' ``/label`` were
    two tables of one name), its folder or list (``val``, ``train.txt``), or for a stream of several files its
    dataset, with the split its files' names name (``/label (split val)``)."""
    from ..labels import unplaced_split

    if path not in (".", ""):
        return f"{path}:{dataset}" if dataset else path
    split = unplaced_split(stream, path)
    name = dataset or path or "."
    return f"{name} (split {split})" if split is not None else name


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, plural unless one: '1 item', '2,300 items', '0 errors', '1 class', '3 classes'."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def notes(report: Report) -> list[str]:
    """The notes of a report, in a stable order (``NOTES``, then the per-record ones by key)."""
    fixed = [report.info[key] for key in NOTES if key in report.info]
    named = [
        f"{key.split(' ', 1)[1]}: {value}"
        for key, value in sorted(report.info.items())
        if key.startswith(NOTE_PREFIXES)
    ]
    return fixed + named


def render(report: Report, fmt: str) -> str:
    if fmt not in MODULES:
        raise UsageError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    module = importlib.import_module(f"{__name__}.{MODULES[fmt]}")
    text: str = module.render(report)
    return text


__all__ = ["FORMATS", "MEDIA_TYPES", "NOTES", "counted", "human_bytes", "notes", "render"]
