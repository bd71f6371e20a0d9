"""Which datasets may be scanned: paths inside the data roots, after resolving symlinks and ``..``.

Also the dataset's fingerprint for deduplication: every file's relative path, size and mtime.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


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


def fingerprint(target: Path) -> str:
    """A digest of every file under ``target``: relative path, size and modification time (no content)."""
    digest = hashlib.sha256()
    if not target.is_dir():
        st = target.stat()
        digest.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        return digest.hexdigest()
    for folder, dirs, files in os.walk(target):
        dirs.sort()
        rel = os.path.relpath(folder, target)
        for name in sorted(files):
            try:
                st = os.stat(os.path.join(folder, name))
                line = f"{rel}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n"
            except OSError as exc:
                line = f"{rel}/{name}\0error {exc.errno}\n"
            digest.update(line.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def request_digest(target: Path, options: dict[str, Any], callback_url: str | None) -> str:
    """Same digest = same request on an unchanged dataset."""
    body = json.dumps(
        {"target": str(target), "options": options, "callback": callback_url, "files": fingerprint(target)},
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()
