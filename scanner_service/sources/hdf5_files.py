"""Recognising HDF5 files and Caffe HDF5Data lists from their names and first bytes, without h5py.

Detection runs for every scan, whatever the format; keeping it here lets a scan of images or LMDB start
without importing h5py.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SIGNATURE = b"\x89HDF\r\n\x1a\n"
SUFFIXES = frozenset({".h5", ".hdf5", ".hdf", ".he5", ".h5py"})
MAYBE_SUFFIXES = frozenset({".nc", ".nc4", ".netcdf", ".cdf", ".mat"})
"""Formats whose files are HDF5 in one version and not in another (netCDF-4 / netCDF-3, MATLAB v7.3 / v5): in a
folder, such a file is HDF5 when it carries HDF5's signature."""
LIST_SUFFIXES = frozenset({".txt", ".list", ".lst"})
SNIFF_LINES = 50
"""Lines of a list file read to tell an HDF5Data list from other lists."""


def has_signature(path: Path) -> bool:
    """HDF5's signature sits at offset 0, or after a user block at 512, 1024, 2048 ... bytes."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            offset = 0
            while offset + 8 <= size and offset <= 1 << 20:
                fh.seek(offset)
                if fh.read(8) == SIGNATURE:
                    return True
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return False
    return False


def is_hdf5_path(path: Path) -> bool:
    return path.suffix.lower() in SUFFIXES or has_signature(path)


def is_hdf5_member(path: Path) -> bool:
    """Whether a file of a folder is HDF5: by its extension, or for netCDF and MATLAB files by its signature."""
    suffix = path.suffix.lower()
    return suffix in SUFFIXES or (suffix in MAYBE_SUFFIXES and has_signature(path))


@dataclass(frozen=True, slots=True)
class FolderCounts:
    """What a folder holds, searching down (folder links followed): HDF5 files by extension (``named``),
    netCDF-4 and MATLAB v7.3 files by signature (``maybe``), image files by extension, and the bytes of the
    ``named`` files and of the images (counted only when the folder holds both kinds)."""

    named: int
    maybe: int
    images: int
    hdf5_bytes: int = 0
    image_bytes: int = 0


def folder_counts(folder: Path) -> FolderCounts:
    from ..imaging.sniff import IMAGE_EXTENSIONS

    named: list[str] = []
    maybe: list[str] = []
    images: list[str] = []
    for path in walk_files(folder):
        suffix = os.path.splitext(path)[1].lower()
        if suffix in IMAGE_EXTENSIONS:
            images.append(path)
        elif suffix in SUFFIXES:
            named.append(path)
        elif suffix in MAYBE_SUFFIXES and has_signature(Path(path)):
            maybe.append(path)
    if not (named or maybe) or not images:
        return FolderCounts(len(named), len(maybe), len(images))
    return FolderCounts(len(named), len(maybe), len(images), _bytes(named), _bytes(images))


def walk_files(folder: Path) -> Iterator[str]:
    """The files below a folder, folder links followed as the scans follow them (a folder reached twice, by a
    link cycle or two links, once)."""
    seen: set[tuple[int, int]] = set()
    for root, dirs, names in os.walk(folder, followlinks=True):
        try:
            st = os.stat(root)
        except OSError:
            dirs.clear()
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        for name in names:
            yield os.path.join(root, name)


def _bytes(paths: list[str]) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size
    return total


PLOTS_PER_FILE = 2
"""Images an HDF5 dataset may hold beside each ``.h5`` file (plots, previews) and still be one, whatever
their bytes."""


def holds_hdf5(folder: Path) -> bool:
    """Whether a folder is an HDF5 dataset rather than an image folder. With no image, when it holds HDF5
    files. With images too: when its ``.h5`` files hold at least as many bytes as the images, or the images
    are no more than a few per ``.h5`` file (plots beside the data), or netCDF and MATLAB files outnumber
    them. So a features file or a MATLAB annotation beside each image leaves an image folder one."""
    c = folder_counts(folder)
    if c.named + c.maybe == 0:
        return False
    if c.images == 0:
        return True
    if c.named and (c.images <= PLOTS_PER_FILE * c.named or c.hdf5_bytes >= c.image_bytes):
        return True
    return c.maybe > c.images


def is_hdf5_source(path: Path) -> bool:
    """An HDF5 file (by extension or signature), or a folder holding one."""
    if path.is_file():
        return is_hdf5_path(path)
    return path.is_dir() and holds_hdf5(path)


def is_binary(head: bytes) -> bool:
    """Whether the first bytes of a file are binary data rather than text: NUL bytes in more than a quarter
    of its lines (a text list with a stray NUL in a line is still a list; that line is a list-syntax finding)."""
    if b"\0" not in head:
        return False
    lines = head.split(b"\n")
    return sum(1 for line in lines if b"\0" in line) * 4 > len(lines)


def looks_like_hdf5_list(path: Path) -> bool:
    """A text file whose first non-blank lines mostly name HDF5 files."""
    if not path.is_file() or path.suffix.lower() not in LIST_SUFFIXES:
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(64 << 10)
    except OSError:
        return False
    if is_binary(head):
        return False
    lines = [ln.strip() for ln in head.decode("utf-8", "replace").splitlines() if ln.strip()][:SNIFF_LINES]
    if not lines:
        return False
    hits = sum(1 for ln in lines if Path(ln.split()[0]).suffix.lower() in SUFFIXES)
    return hits * 2 > len(lines)
