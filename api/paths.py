"""Which datasets may be scanned: paths inside the data roots, after resolving symlinks and ``..``.

Also the dataset's fingerprint for deduplication: every file's path, size and mtime, a list's entries included.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from scanner_service.config import ScanConfig
from scanner_service.errors import DscanError
from scanner_service.sources import open_source
from scanner_service.sources.walk import Outside, fence, files_below


class PathRejected(Exception):
    """A requested path that cannot be scanned; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def resolve_inside(raw: str, roots: list[Path], what: str = "path") -> Path:
    """The real path of ``raw`` (relative paths are taken inside the first root), if it lies in a root.

    403 when it resolves outside every root (symlinks and ``..`` included); 422 when it does not exist.
    """
    if "\x00" in raw:
        raise PathRejected(422, f"{what} contains a NUL character")
    path = Path(raw)
    if not path.is_absolute():
        path = roots[0] / path
    try:
        real = path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:
        raise PathRejected(422, f"{what} {raw!r} cannot be resolved: {exc}") from None
    if not any(real == root or real.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(r) for r in roots)
        raise PathRejected(403, f"{what} {raw!r} is outside the data roots ({allowed}): it cannot be scanned")
    try:
        exists = real.exists()
    except OSError as exc:  # a name too long for the file system ...
        raise PathRejected(422, f"{what} {raw!r} cannot be read: {exc.strerror or exc}") from None
    if not exists:
        raise PathRejected(422, f"{what} {raw!r} does not exist")
    return real


def fingerprint(target: Path, config: ScanConfig, kind: str | None = None) -> str:
    """A digest of every file the scan reads: relative path, size and modification time (no content).

    That is every file below a folder (folder links followed, as the scans follow them), or the file itself
    and, for a list, every file it names.
    """
    digest = hashlib.sha256()
    if target.is_dir():
        _walk_into(digest, target, fence(config.confine))
        return digest.hexdigest()
    digest.update(_stat_line(target, "."))
    try:
        listed = open_source(target, config, kind).listed_files()
    except DscanError:  # no dataset: the scan reports it
        listed = []
    for path in listed:
        digest.update(_stat_line(path, str(path)))
    return digest.hexdigest()


def _stat_line(path: Path | str, name: str) -> bytes:
    try:
        st = os.stat(path)
        line = f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n"
    except OSError as exc:
        line = f"{name}\0error {exc.errno}\n"
    return line.encode("utf-8", "surrogateescape")


def _walk_into(digest: Any, target: Path, outside: Outside | None) -> None:
    for path in files_below(target, outside):  # folder links followed, each folder once, as the scans walk
        folder, name = os.path.split(path)
        digest.update(_stat_line(path, f"{os.path.relpath(folder, target)}/{name}"))


def request_digest(
    target: Path, config: ScanConfig, options: dict[str, Any], callback_url: str | None, kind: str | None = None
) -> str:
    """Same digest = same request on an unchanged dataset (``kind``: the format, when already detected)."""
    files = fingerprint(target, config, kind)
    body = json.dumps(
        {"target": str(target), "options": options, "callback": callback_url, "files": files},
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()
