"""The files outside a dataset's HDF5 files that a scan of it reads data from, and their state.

A virtual dataset takes its values from source files, a dataset with external storage from raw data files,
and an external link names an object of another file. Rewrite one of those and a scan of the HDF5 files
reports something else, though the HDF5 files themselves are untouched (same size, same modification time).
The service's deduplication records these files when it plans a job (:func:`linked_files`) and hands that
job out again only while they are as it found them (:func:`unchanged`).

Only structure is read (link tables and dataset creation properties, never values), read-only, in a forked
child (a file whose structure crashes HDF5 costs the answer, not the caller). A virtual dataset's source files
are looked into in turn (a source may itself be virtual or stored externally); external links are named, not
followed (the scan does not follow them either). Files a confined scan may not read are left out: it never
reads them. A file that is not there is recorded as missing where HDF5 looks first, so that it appearing
changes the answer too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import ScanConfig
from .errors import DscanError
from .partial import Partial
from .sources import open_source

if TYPE_CHECKING:
    from .sources.walk import Outside

MAX_LINKED_FILES = 10_000
"""More linked files than this: the answer is unknown (each is looked at again by every request that wants
to reuse the scan)."""

MISSING = "missing"

LinkedStates = dict[str, str]
"""Path -> :func:`file_state`, for every linked file."""


class _Unknown(Exception):
    """What the scan reads cannot be told (a damaged structure, a file-name pattern, too many files)."""


def file_state(path: str | Path) -> str:
    """A file's size, modification time and inode (no content); ``missing`` when it is not there."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return MISSING
    except OSError as exc:
        return f"error {exc.errno}"
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino}"


def unchanged(states: Mapping[str, str]) -> bool:
    """Whether every file is in the state recorded (``states``, from :func:`linked_files`)."""
    return all(file_state(path) == state for path, state in states.items())


def linked_files(path: Path, config: ScanConfig, kind: str | None = None) -> LinkedStates | None:
    """Every file outside the dataset's own HDF5 files that a scan of ``path`` reads data from, with its
    state: ``{}`` for a dataset without any (and for formats other than HDF5); None when they cannot all be
    known (a structure HDF5 cannot walk, a file-name pattern, more than ``MAX_LINKED_FILES``, a crash)."""
    from .forked import Died, each

    for _, result in each(1, lambda _i: _collect(path, config, kind)):
        return None if isinstance(result, Died) else result
    return None


def _collect(path: Path, config: ScanConfig, kind: str | None) -> LinkedStates | None:
    from .sources.hdf5 import Hdf5Source

    try:
        source = open_source(path, config, kind)
        if not isinstance(source, Hdf5Source):
            return {}
        finder = _Finder(source.fenced)
        for hdf5_file, _line in source.list_files(Partial()):
            finder.look_into(hdf5_file)
    except (_Unknown, DscanError, OSError, RuntimeError, ValueError, KeyError):
        return None
    return {name: file_state(name) for name in sorted(finder.linked)}


class _Finder:
    """Walks HDF5 files' structure and collects the files their datasets read from."""

    def __init__(self, outside: Outside | None) -> None:
        self.outside = outside
        self.linked: set[str] = set()
        self.walked: set[str] = set()

    def look_into(self, hdf5_file: Path) -> None:
        """Collect what ``hdf5_file``'s datasets read from. A file HDF5 cannot open adds nothing: nothing is
        read through it (and its own state is the request's business)."""
        from .sources.hdf5 import open_h5

        real = os.path.realpath(hdf5_file)
        if real in self.walked:
            return
        self.walked.add(real)
        try:
            fh = open_h5(hdf5_file)
        except OSError:
            return
        with fh:
            seen: set[int] = set()
            fh.id.links.visit(lambda name, info: self._link(fh, hdf5_file, name, info, seen), info=True)

    def _link(self, fh: Any, hdf5_file: Path, name: bytes, info: Any, seen: set[int]) -> None:
        import h5py

        if info.type == h5py.h5l.TYPE_EXTERNAL:
            filename, _target = fh.id.links.get_val(name)
            self._note(_decoded(filename), hdf5_file.parent)
            return
        if info.type != h5py.h5l.TYPE_HARD:
            return
        obj = h5py.h5o.open(fh.id, name)
        if not isinstance(obj, h5py.h5d.DatasetID) or hash(obj) in seen:
            return
        seen.add(hash(obj))
        plist = obj.get_create_plist()
        if plist.get_layout() == h5py.h5d.VIRTUAL:
            self._virtual_sources(plist, hdf5_file)
        for i in range(plist.get_external_count()):
            self._external_storage(_decoded(plist.get_external(i)[0]), hdf5_file)

    def _virtual_sources(self, plist: Any, hdf5_file: Path) -> None:
        from .sources.hdf5 import vds_source_file

        for name in {_decoded(plist.get_virtual_filename(i)) for i in range(plist.get_virtual_count())}:
            if name == ".":
                continue
            if "%b" in name:  # a pattern of an unlimited virtual dataset: which files it maps is not known
                if self.outside is not None:
                    continue  # a confined scan does not read that dataset at all
                raise _Unknown(name)
            found = vds_source_file(hdf5_file, name)
            if found is None:
                self._note(name, hdf5_file.parent)
            elif self._note(str(found), hdf5_file.parent):
                self.look_into(found)

    def _external_storage(self, name: str, hdf5_file: Path) -> None:
        from .sources.hdf5 import external_file

        found = external_file(hdf5_file, name)
        self._note(str(found) if found is not None else name, hdf5_file.parent)

    def _note(self, name: str, origin: Path) -> bool:
        """Record the file ``name`` (relative: to ``origin``); False when a confined scan may not read it."""
        path = os.path.abspath(origin / name)
        if self.outside is not None and self.outside(path):
            return False
        self.linked.add(path)
        if len(self.linked) > MAX_LINKED_FILES:
            raise _Unknown(f"more than {MAX_LINKED_FILES} linked files")
        return True


def _decoded(name: str | bytes) -> str:
    return name if isinstance(name, str) else os.fsdecode(name)
