"""Recognising HDF5 files and Caffe HDF5Data lists from their names and first bytes, without h5py.

Detection runs for every scan, whatever the format; keeping it here lets a scan of images or LMDB start
without importing h5py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .walk import Outside, files_below, size_of

SIGNATURE = b"\x89HDF\r\n\x1a\n"
SUFFIXES = frozenset({".h5", ".hdf5", ".hdf", ".he5", ".h5py"})
MAYBE_SUFFIXES = frozenset({".nc", ".nc4", ".netcdf", ".cdf", ".mat"})
"""Formats whose files are HDF5 in one version and not in another (netCDF-4 / netCDF-3, MATLAB v7.3 / v5): in a
folder, such a file is HDF5 when it carries HDF5's signature."""
LIST_SUFFIXES = frozenset({".txt", ".list", ".lst"})
NUMPY_SUFFIXES = frozenset({".npy", ".npz"})
"""NumPy files: in an HDF5 folder, a dataset of their own (a mean image, statistics), named in a note."""
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


@dataclass(frozen=True, slots=True)
class FolderContents:
    """The HDF5 files below a folder (by extension, or netCDF-4 and MATLAB v7.3 files by signature) and its image
    files (by extension), folder links followed."""

    named: list[str]
    """HDF5 files by their extension."""
    maybe: list[str]
    """netCDF and MATLAB files that carry HDF5's signature."""
    images: list[str]
    links_out: list[str]
    """Links a confined scan does not follow (they resolve outside its roots)."""
    unlistable: list[str] = field(default_factory=list)
    """Folders below it that cannot be listed."""
    other_versions: list[str] = field(default_factory=list)
    """netCDF and MATLAB files without HDF5's signature: another version of the format, or damaged."""
    arrays: list[str] = field(default_factory=list)
    """NumPy ``.npy`` files and ``.npz`` archives (the HDF5 source does not read them)."""

    @property
    def hdf5(self) -> list[str]:
        """Every HDF5 file, in path order (folder by folder, as ``Path`` sorts them)."""
        return sorted(self.named + self.maybe, key=lambda p: Path(p).parts)


def folder_contents(folder: Path, outside: Outside | None = None) -> FolderContents:
    from ..imaging.sniff import IMAGE_EXTENSIONS

    contents = FolderContents([], [], [], [])
    for path in files_below(folder, outside, contents.links_out, contents.unlistable):
        suffix = os.path.splitext(path)[1].lower()
        if suffix in IMAGE_EXTENSIONS:
            contents.images.append(path)
        elif suffix in SUFFIXES:
            contents.named.append(path)
        elif suffix in MAYBE_SUFFIXES:
            (contents.maybe if has_signature(Path(path)) else contents.other_versions).append(path)
        elif suffix in NUMPY_SUFFIXES:
            contents.arrays.append(path)
    return contents


OTHER_FORMATS = (
    (b"CDF\x01", "netCDF-3 classic"),
    (b"CDF\x02", "netCDF-3 64-bit offset"),
    (b"CDF\x05", "netCDF-3 64-bit data"),
    (b"MATLAB 5.0", "MATLAB v5"),
    (b"\xcd\xf3\x00\x01", "NASA CDF"),
    (b"\xcd\xf2\x60\x02", "NASA CDF"),
    (b"\x0e\x03\x13\x01", "HDF4"),
)
"""First bytes of the versions of these formats that are no HDF5 (dscan does not read them)."""


def other_version(path: str) -> tuple[str, bool]:
    """What a netCDF or MATLAB file without HDF5's signature is: (description, damaged). Damaged: empty, cut
    inside a header, or starting like no version of its format (a netCDF-4 file whose first bytes are lost)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}", True
    if not head:
        return "empty file (0 bytes)", True
    for magic, name in OTHER_FORMATS:
        if head.startswith(magic):
            return name, False
        if len(head) < len(magic) and magic.startswith(head):
            return f"truncated: {len(head)} bytes, the start of a {name} header", True
    if len(head) < len(SIGNATURE) and SIGNATURE.startswith(head):
        return f"truncated: {len(head)} bytes, the start of an HDF5 (netCDF-4) header", True
    return f"no HDF5 signature and no other version's header (first bytes {head[:8].hex(' ')})", True


PLOTS_PER_FILE = 2
"""Images an HDF5 dataset may hold beside each ``.h5`` file (plots, previews) and still be one, whatever
their bytes."""


def holds_hdf5(folder: Path, outside: Outside | None = None) -> bool:
    """Whether a folder is an HDF5 dataset rather than an image folder. With no image, when it holds HDF5
    files. With images too: when its ``.h5`` files hold at least as many bytes as the images, or the images
    are no more than a few per ``.h5`` file (plots beside the data), or netCDF and MATLAB files outnumber
    them. So a features file or a MATLAB annotation beside each image leaves an image folder one."""
    c = folder_contents(folder, outside)
    named, images = len(c.named), len(c.images)
    if named + len(c.maybe) == 0:
        return False
    if images == 0:
        return True
    if named and (images <= PLOTS_PER_FILE * named or size_of(c.named) >= size_of(c.images)):
        return True
    return len(c.maybe) > images


def is_hdf5_source(path: Path, outside: Outside | None = None) -> bool:
    """An HDF5 file (by extension or signature), or a folder holding one."""
    if path.is_file():
        return is_hdf5_path(path)
    return path.is_dir() and holds_hdf5(path, outside)


STRAY_NULS = 2
"""NUL bytes a text file may hold and still be text, whatever its length (a two-line list with one stray NUL)."""


def is_binary(head: bytes) -> bool:
    """Whether the first bytes of a file are binary data rather than text: NUL bytes in more than a quarter
    of its lines (a text list with a stray NUL in a line is still a list; that line is a list-syntax finding),
    and more of them than a short list's stray ones."""
    if head.count(b"\0") <= STRAY_NULS:
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
    hits = sum(1 for ln in lines if SUFFIXES & {Path(ln.split()[0]).suffix.lower(), Path(ln).suffix.lower()})
    return hits * 2 > len(lines)
