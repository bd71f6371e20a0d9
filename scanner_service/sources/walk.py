"""Walking a folder as the scans do: folder links followed, each folder once (a link cycle, or a folder two
links reach, is walked the first time only), in sorted order."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def files_below(folder: Path | str) -> Iterator[str]:
    """The paths of the files below ``folder``, folders and names sorted."""
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
        for name in sorted(names):
            yield os.path.join(root, name)
