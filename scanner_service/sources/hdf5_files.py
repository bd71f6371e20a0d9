"""Recognising HDF5 files and Caffe HDF5Data lists from their names and first bytes, without h5py.

Detection runs for every scan, whatever the format; keeping it here lets a scan of images or LMDB start
without importing h5py.
"""

from __future__ import annotations

import contextlib
import os
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


def folder_counts(folder: Path) -> tuple[int, int, int, int]:
    """What a folder holds, searching down: HDF5 files (by extension, or netCDF and MATLAB files by signature)
    and image files (by extension), as (HDF5 files, their bytes, images, their bytes). Bytes are counted only
    when the folder holds both."""
    from ..imaging.sniff import IMAGE_EXTENSIONS

    hdf5: list[str] = []
    images: list[str] = []
    for root, _, names in os.walk(folder):
        for name in names:
            suffix = os.path.splitext(name)[1].lower()
            if suffix in IMAGE_EXTENSIONS:
                images.append(os.path.join(root, name))
            elif suffix in SUFFIXES or (suffix in MAYBE_SUFFIXES and has_signature(Path(root, name))):
                hdf5.append(os.path.join(root, name))
    if not hdf5 or not images:
        return len(hdf5), 0, len(images), 0
    return len(hdf5), _bytes(hdf5), len(images), _bytes(images)


def _bytes(paths: list[str]) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size
    return total


def holds_hdf5(folder: Path) -> bool:
    """Whether a folder is an HDF5 dataset rather than an image folder: it holds HDF5 files, and when it holds
    images too, the HDF5 files hold at least as many bytes (plots beside the data, a features file or a MATLAB
    annotation beside images: the data is what weighs)."""
    files, hdf5_bytes, images, image_bytes = folder_counts(folder)
    return files > 0 and (images == 0 or hdf5_bytes >= image_bytes)


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
