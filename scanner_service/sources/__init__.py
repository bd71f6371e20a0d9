"""Dataset formats, and detection of the format from a path.

``DETECTION`` lists every format once, in detection order: the first whose test accepts the path wins. The
tests read names and first bytes only, so detection imports no format library; a format's module (and
h5py, lmdb ...) is imported when a source of that kind is opened.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

from ..config import ScanConfig
from ..errors import SourceNotFound, UnsupportedSource
from .base import Plan, Shard, Source, SourceInfo
from .hdf5_files import is_hdf5_source, looks_like_hdf5_list
from .imagelist import ImageListSource
from .images import ImageFileSource, ImageFolderSource
from .lmdb_files import is_lmdb_source
from .npy_files import is_numpy_source
from .walk import Outside, fence, shared_listings

DETECTION: tuple[tuple[str, Callable[[Path, Outside | None], bool]], ...] = (
    ("lmdb", lambda path, _outside: is_lmdb_source(path)),
    ("hdf5-list", lambda path, _outside: looks_like_hdf5_list(path)),
    ("numpy", is_numpy_source),  # (before hdf5 and images: a folder mostly of arrays, a model.h5 or plots beside)
    ("hdf5", is_hdf5_source),
    ("image-file", ImageFileSource.detect),  # (before image-list: a file named as an image is no list)
    ("image-list", lambda path, _outside: ImageListSource.detect(path)),
    ("images", ImageFolderSource.detect),
)
"""Each test gets the path and, for a confined scan, the test of its roots: a folder's kind is judged from
what the scan may read (links out of the roots are not followed)."""

CLASSES: dict[str, str] = {
    "lmdb": "lmdb:LmdbSource",
    "hdf5-list": "hdf5list:Hdf5ListSource",
    "numpy": "npy:NumpySource",
    "hdf5": "hdf5:Hdf5Source",
    "image-file": "images:ImageFileSource",
    "image-list": "imagelist:ImageListSource",
    "images": "images:ImageFolderSource",
}
"""Each kind's module (in this package) and class."""

BY_KIND: dict[str, type[Source]] = {}
"""Source classes already imported, by kind (a test may register a kind of its own here)."""


def source_class(kind: str) -> type[Source]:
    """The source class of ``kind``, importing its module on first use; raises UnsupportedSource."""
    found = BY_KIND.get(kind)
    if found is None:
        if kind not in CLASSES:
            raise UnsupportedSource(f"unknown dataset kind {kind!r} (formats: {', '.join(CLASSES)})", kind)
        module, name = CLASSES[kind].split(":")
        found = BY_KIND[kind] = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return found


def detect_kind(path: Path, outside: Outside | None = None) -> str:
    """The format of the dataset at ``path``; raises SourceNotFound or UnsupportedSource."""
    if not path.exists():
        raise SourceNotFound(f"{path} does not exist", str(path))
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):  # (a folder: listed and entered)
        raise UnsupportedSource(f"{path} cannot be read: permission denied", str(path))
    with shared_listings():  # (each format's test walks the folder; it is walked once)
        for kind, accepts in DETECTION:
            if accepts(path, outside):
                return kind
    known = ", ".join(CLASSES)
    why = _empty(path)
    raise UnsupportedSource(f"{path} is not a dataset dscan can read{why} (formats: {known})", str(path))


def _empty(path: Path) -> str:
    """Why nothing was recognised, when it is emptiness (an empty file, a folder with no file below it) or a
    folder of datasets (LMDB environments side by side: one of them is the path to scan)."""
    try:
        if path.is_dir():
            inside = sorted(p.name for p in path.iterdir() if is_lmdb_source(p))  # subdir=False files too
            if inside:
                shown = ", ".join(inside[:5]) + (f" and {len(inside) - 5} more" if len(inside) > 5 else "")
                return f": it holds LMDB environments ({shown}); scan each of them"
        if path.is_file():
            return ": the file is empty" if path.stat().st_size == 0 else ""
        if path.is_dir() and not any(files for _, _, files in os.walk(path)):
            return ": the folder holds no file (its class folders, if any, are empty)"
    except OSError:
        return ""
    return ""


def open_source(path: Path, config: ScanConfig, kind: str | None = None) -> Source:
    """The source object for ``path`` (format detected unless ``kind`` is given)."""
    path = path.absolute()
    chosen = kind or detect_kind(path, fence(config.confine))
    cls = source_class(chosen)
    if not path.exists():
        raise SourceNotFound(f"{path} does not exist", str(path))
    return cls(path, config)


__all__ = [
    "BY_KIND",
    "CLASSES",
    "DETECTION",
    "Plan",
    "Shard",
    "Source",
    "SourceInfo",
    "detect_kind",
    "open_source",
    "source_class",
]
