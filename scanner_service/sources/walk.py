"""Walking a folder as the scans do: folder links followed, each folder once (a link cycle, or a folder two
links reach, is walked the first time only), in sorted order.

A confined scan (the service's data roots) follows no link that resolves outside its roots: the link is
reported as a link out (its own path, inside the roots), and nothing behind it is listed, opened or
counted, so a report tells nothing about what lies elsewhere, not even whether it exists.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path

Outside = Callable[[str], bool]
"""Whether a path resolves (links followed) outside a confined scan's roots."""

LINK_OUT = "a link that resolves outside the allowed data roots: not followed, not read"


def fence(roots: Iterable[str]) -> Outside | None:
    """The test for ``roots`` (None when there are none: the scan is not confined)."""
    real = [os.path.realpath(root) for root in roots]
    if not real:
        return None
    prefixes = [root.rstrip(os.sep) + os.sep for root in real]

    def outside(path: str) -> bool:
        resolved = os.path.realpath(path)
        return not any(
            resolved == root or resolved.startswith(prefix) for root, prefix in zip(real, prefixes, strict=True)
        )

    return outside


def link_out(path: str, outside: Outside | None) -> bool:
    """Whether ``path`` is a link a confined scan does not follow (a plain entry lies where its folder does)."""
    return outside is not None and os.path.islink(path) and outside(path)


UNLISTABLE = "a folder that cannot be listed (permission denied?): the files in it were not scanned"
"""The finding's detail for a folder below the dataset that the scan cannot enter (unreadable-file)."""


Listing = tuple[list[str], list[str], list[str]]
"""The files below a folder, the links out, the folders that cannot be listed."""

_LISTINGS: ContextVar[dict[tuple[str, int], Listing] | None] = ContextVar("dscan_listings", default=None)


@contextlib.contextmanager
def shared_listings() -> Iterator[None]:
    """Within the block, ``files_below`` walks each folder once: format detection asks several formats about
    one folder (HDF5 files? arrays? images?), and a folder of a million files takes seconds to walk. Kept only
    for the block (files may change between two scans) and per context (the service detects in threads)."""
    token = _LISTINGS.set({})
    try:
        yield
    finally:
        _LISTINGS.reset(token)


def files_below(
    folder: Path | str,
    outside: Outside | None = None,
    links_out: list[str] | None = None,
    unlistable: list[str] | None = None,
) -> Iterator[str]:
    """The paths of the files below ``folder``, folders and names sorted. With ``outside``, links that leave
    the roots are not followed; their paths go to ``links_out``. Folders that cannot be listed go to
    ``unlistable`` (a dataset must not pass with part of it unread). Inside ``shared_listings``, a folder
    walked before (with the same ``outside``) is not walked again."""
    memo = _LISTINGS.get()
    if memo is None:
        yield from _walk_files(folder, outside, links_out, unlistable)
        return
    key = (os.fspath(folder), id(outside))
    if key not in memo:
        outs: list[str] = []
        unlisted: list[str] = []
        memo[key] = (list(_walk_files(folder, outside, outs, unlisted)), outs, unlisted)
    paths, outs, unlisted = memo[key]
    if links_out is not None:
        links_out.extend(outs)
    if unlistable is not None:
        unlistable.extend(unlisted)
    yield from paths


def _walk_files(
    folder: Path | str,
    outside: Outside | None = None,
    links_out: list[str] | None = None,
    unlistable: list[str] | None = None,
) -> Iterator[str]:
    seen: set[tuple[int, int]] = set()

    def unlisted(error: OSError) -> None:
        if unlistable is not None and error.filename is not None:
            unlistable.append(os.fsdecode(error.filename))

    for root, dirs, names in os.walk(folder, followlinks=True, onerror=unlisted):
        try:
            st = os.stat(root)
        except OSError:
            dirs.clear()
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        if outside is not None:
            refused = [d for d in dirs if link_out(os.path.join(root, d), outside)]
            dirs[:] = [d for d in dirs if d not in refused]
            if links_out is not None:
                links_out.extend(os.path.join(root, d) for d in refused)
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if link_out(path, outside):
                if links_out is not None:
                    links_out.append(path)
                continue
            yield path


def size_of(paths: Iterable[str]) -> int:
    """The bytes the files hold together (a file gone or unreadable counts 0)."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size
    return total
