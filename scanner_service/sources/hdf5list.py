"""Caffe HDF5Data source lists: a text file naming one HDF5 file per line.

Paths are relative to the list file's folder, or to ``--root`` (``config.root``); absolute paths are kept.
Blank lines are skipped. A line that is not a single HDF5 path (an image list line ``path label``, a stray
token) is ``list-syntax``, and so is the name of a file that holds whitespace: Caffe reads the list's names
split at whitespace (``source_file >> line``) and fails on the parts (the file is scanned all the same). A
listed file that does not exist is ``missing-file``, one that is no regular file (a folder, a named pipe)
``unreadable-file``. Files are scanned in list order, which is the order Caffe reads them in when ``shuffle``
is off.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SourceNotFound
from ..location import Location
from ..partial import Partial
from .hdf5 import NOT_REGULAR, Hdf5Source
from .hdf5_files import SUFFIXES, looks_like_hdf5_list
from .list_roots import OtherRoot
from .walk import Outside


def _entries(path: Path) -> list[str]:
    with path.open("r", encoding="utf-8-sig", errors="replace") as fh:  # -sig: a leading BOM is no path
        return [line.rstrip("\r\n") for line in fh]


class Hdf5ListSource(Hdf5Source):
    kind = "hdf5-list"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        return looks_like_hdf5_list(path)

    @property
    def root(self) -> Path:
        """The folder the list's paths are relative to: ``--root``, else the list's own folder."""
        return Path(self.config.root).absolute() if self.config.root else self.path.parent

    def listed_files(self) -> list[Path]:
        return [path for path, _line in self.list_files(Partial())]

    def list_files(self, partial: Partial) -> list[tuple[Path, int | None]]:
        if self.config.root and not Path(self.config.root).is_dir():
            raise SourceNotFound(f"--root {self.config.root}: no such folder (the list's paths are relative to it)")
        files: list[tuple[Path, int | None]] = []
        list_name = self.path.name
        elsewhere = OtherRoot(self.root, self.outside)
        for number, raw in enumerate(_entries(self.path), start=1):
            entry = raw.strip()
            if not entry:
                continue
            where = Location(path=list_name, line=number)
            if "\0" in entry:
                partial.add("S005", where.model_copy(update={"detail": f"the line holds a NUL byte: {entry!r}"}))
                continue
            target = Path(entry) if Path(entry).is_absolute() else self.root / entry
            refused = self.outside(target)
            if refused is not None:
                partial.add("S001", where.model_copy(update={"detail": f"{entry}: {refused}"}))
                continue
            try:
                found = target.is_file()  # the whole line: a name with spaces is scanned, and reported
            except OSError as exc:  # a name too long for the file system ...
                partial.add("S001", where.model_copy(update={"detail": f"{entry}: {exc.strerror or exc}"}))
                continue
            if found:
                if len(entry.split()) > 1:  # Caffe reads names split at whitespace (`source_file >> line`)
                    names = ", ".join(map(repr, entry.split()))
                    detail = f"Caffe's HDF5Data layer reads the names {names} from this line, not the file {entry!r}"
                    partial.add("S005", where.model_copy(update={"detail": detail + " (a name with spaces)"}))
                files.append((target, number))
                continue
            if target.exists():  # a folder; a named pipe, socket or device (opening it may block forever)
                what = "a folder, not an HDF5 file: not read" if target.is_dir() else NOT_REGULAR
                partial.add("S001", where.model_copy(update={"detail": f"{entry}: {what}"}))
                continue
            if len(entry.split()) != 1 or Path(entry).suffix.lower() not in SUFFIXES:
                partial.add("S005", where.model_copy(update={"detail": f"expected one HDF5 path, got {entry!r}"}))
                continue
            hint = elsewhere.hint(entry, len(files))
            partial.add("S004", where.model_copy(update={"detail": f"{entry} does not exist{hint}"}))
        if not files and not partial.findings:
            partial.add("S006", Location(path=list_name, detail="the list names no file"))
        return files
