"""Where a list's paths lead when they do not resolve against the root a scan used (image lists and HDF5
lists): the folder they are relative to, named in each ``missing-file`` with the ``--root`` to scan with."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path


def _folders_in(folder: Path) -> list[Path]:
    """The folders in ``folder``, hidden ones aside, sorted ([] when it cannot be listed)."""
    with contextlib.suppress(OSError), os.scandir(folder) as it:
        return sorted(Path(e.path) for e in it if not e.name.startswith(".") and e.is_dir())
    return []


ROOT_GUESSES = 16
"""Missing files whose path is tried against other folders, before the list is taken for one whose paths
fit no folder near it."""


class OtherRoot:
    """A hint for listed paths that do not exist: the folder they are relative to, when it is not the root
    the scan used. Tried, for the first ``ROOT_GUESSES`` missing files while no listed file has been found
    under the root (a file or two missing from a list that resolves is no wrong root), against the root's
    parent, its sub-folders, the folders beside it (``lists/`` beside ``images/``) and the working folder (a
    list written with paths relative to where its script ran); once one folder holds a missing file, only
    that folder is tried for the others."""

    def __init__(self, root: Path, outside: Callable[[Path], str | None]) -> None:
        self.root = root
        self.outside = outside
        """The source's fence: a confined scan says nothing of files outside its roots, not even that they exist."""
        self.tries = 0
        self.found: Path | None = None
        self.candidates: list[Path] | None = None

    def hint(self, entry: str, resolved: int) -> str:
        """The hint for ``entry``, missing after ``resolved`` listed files were found under the root."""
        if os.path.isabs(entry):
            return ""
        if self.found is None:
            if self.tries >= ROOT_GUESSES or resolved:
                return ""
            self.tries += 1
            if self.candidates is None:  # (the root is listed once: it may hold a million files)
                self.candidates = self._candidates()
            self.found = next((c for c in self.candidates if self._holds(c, entry)), None)
            if self.found is None:
                return ""
        elif not self._holds(self.found, entry):
            return ""
        there = self.found
        return f" (it exists in {there}: the list's paths are relative to that folder; scan with --root {there})"

    def _holds(self, folder: Path, entry: str) -> bool:
        target = folder / entry
        return self.outside(target) is None and os.path.isfile(target)

    def _candidates(self) -> list[Path]:
        root = self.root.absolute()
        around = [root.parent, *_folders_in(root), *_folders_in(root.parent), Path.cwd()]
        return [folder for folder in dict.fromkeys(around) if folder != root and self.outside(folder) is None]
