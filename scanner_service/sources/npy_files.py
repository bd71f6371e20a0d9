"""Recognising NumPy ``.npy`` files, ``.npz`` archives and folders of them, from names and first bytes only.

Detection runs for every scan: nothing here imports a format library (``zipfile`` reads an archive's names).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..imaging.sniff import IMAGE_EXTENSIONS
from .hdf5_files import LIST_SUFFIXES, MAYBE_SUFFIXES
from .hdf5_files import SUFFIXES as HDF5_SUFFIXES
from .walk import Outside, files_below, size_of

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
SUFFIXES = frozenset({".npy", ".npz"})
CLAIMED = HDF5_SUFFIXES | MAYBE_SUFFIXES | LIST_SUFFIXES | IMAGE_EXTENSIONS | {".csv", ".tsv"}
"""Extensions other formats read: a file named so is theirs, whatever its first bytes."""
PLOTS_PER_FILE = 2
"""Images a folder of arrays may hold beside each array file (plots, previews) and still be one."""


def head(path: Path | str, size: int = 8) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def holds_arrays(path: Path) -> bool:
    """A zip archive (named otherwise than ``.npz``) whose members are all ``.npy`` arrays."""
    import zipfile  # (here: every scan imports this module to detect its format; zipfile costs 3 ms)

    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False
    return bool(names) and all(name.endswith(".npy") for name in names)


def is_numpy_file(path: Path) -> bool:
    """A ``.npy``/``.npz`` file by its extension (a damaged one is scanned as one, and reported), or a file with
    another extension that no other format claims and that starts like a ``.npy`` (``\\x93NUMPY``) or is a zip
    of ``.npy`` members."""
    suffix = path.suffix.lower()
    if suffix in SUFFIXES:
        return True
    if suffix in CLAIMED:
        return False
    first = head(path)
    return first.startswith(NPY_MAGIC) or (first.startswith(ZIP_MAGIC) and holds_arrays(path))


@dataclass(slots=True)
class FolderArrays:
    """The files below a folder, by the format their extension names (folder links followed)."""

    arrays: list[str] = field(default_factory=list)
    hdf5: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    links_out: list[str] = field(default_factory=list)
    unlistable: list[str] = field(default_factory=list)


def folder_arrays(folder: Path, outside: Outside | None = None) -> FolderArrays:
    found = FolderArrays()
    for path in files_below(folder, outside, found.links_out, found.unlistable):
        suffix = os.path.splitext(path)[1].lower()
        if suffix in SUFFIXES:
            found.arrays.append(path)
        elif suffix in HDF5_SUFFIXES:
            found.hdf5.append(path)
        elif suffix in IMAGE_EXTENSIONS:
            found.images.append(path)
    return found


def mostly_arrays(found: FolderArrays) -> bool:
    """Whether a folder is a NumPy dataset: its ``.npy``/``.npz`` files outnumber its HDF5 and image files
    together, or hold at least as many bytes as those with no more than a few images per array file (plots
    beside the arrays). So an image folder with an ``embeddings.npy``, or HDF5 files beside a ``mean.npy``,
    keep their kinds, and arrays beside a Keras ``model.h5`` are read as arrays."""
    arrays, others = len(found.arrays), len(found.hdf5) + len(found.images)
    if arrays == 0:
        return False
    if arrays > others:
        return True
    if len(found.images) > PLOTS_PER_FILE * arrays:
        return False
    return size_of(found.arrays) >= size_of(found.hdf5) + size_of(found.images)


def is_numpy_source(path: Path, outside: Outside | None = None) -> bool:
    """A NumPy file, or a folder that is mostly NumPy files."""
    if path.is_file():
        return is_numpy_file(path)
    return path.is_dir() and mostly_arrays(folder_arrays(path, outside))
