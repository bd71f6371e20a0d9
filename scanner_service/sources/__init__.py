"""Dataset formats, and detection of the format from a path.

``SOURCES`` lists every format once, in detection order: the first whose ``detect`` accepts the path wins.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ScanConfig
from ..errors import SourceNotFound, UnsupportedSource
from .base import Plan, Shard, Source, SourceInfo
from .hdf5 import Hdf5Source
from .hdf5list import Hdf5ListSource
from .imagelist import ImageListSource
from .images import ImageFolderSource
from .lmdb import LmdbSource

SOURCES: tuple[type[Source], ...] = (LmdbSource, Hdf5ListSource, Hdf5Source, ImageListSource, ImageFolderSource)

BY_KIND: dict[str, type[Source]] = {s.kind: s for s in SOURCES}


def detect_kind(path: Path) -> str:
    """The format of the dataset at ``path``; raises SourceNotFound or UnsupportedSource."""
    if not path.exists():
        raise SourceNotFound(f"{path} does not exist", str(path))
    for source in SOURCES:
        if source.detect(path):
            return source.kind
    known = ", ".join(BY_KIND)
    raise UnsupportedSource(f"{path} is not a dataset dscan can read (formats: {known})", str(path))


def open_source(path: Path, config: ScanConfig, kind: str | None = None) -> Source:
    """The source object for ``path`` (format detected unless ``kind`` is given)."""
    path = path.absolute()
    chosen = kind or detect_kind(path)
    if chosen not in BY_KIND:
        raise UnsupportedSource(f"unknown dataset kind {chosen!r} (formats: {', '.join(BY_KIND)})", str(path))
    if not path.exists():
        raise SourceNotFound(f"{path} does not exist", str(path))
    return BY_KIND[chosen](path, config)


__all__ = ["BY_KIND", "SOURCES", "Plan", "Shard", "Source", "SourceInfo", "detect_kind", "open_source"]
