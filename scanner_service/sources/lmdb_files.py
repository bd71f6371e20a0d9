"""Recognising an LMDB environment from its folder or its data file, without the lmdb library."""

from __future__ import annotations

from pathlib import Path

DATA_FILE = "data.mdb"
LMDB_MAGIC = b"\xde\xc0\xef\xbe"
P_META = 0x08


def is_lmdb_file(path: Path) -> bool:
    """LMDB's meta page: page flags P_META and the magic 0xBEEFC0DE (64-bit and 32-bit builds)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(32)
    except OSError:
        return False
    for flags_at, magic_at in ((10, 16), (6, 12)):
        if len(head) >= magic_at + 4 and head[magic_at : magic_at + 4] == LMDB_MAGIC:
            return bool(int.from_bytes(head[flags_at : flags_at + 2], "little") & P_META)
    return False


def is_lmdb_source(path: Path) -> bool:
    """A folder holding ``data.mdb``, a file named ``data.mdb``, or any LMDB data file."""
    if path.is_dir():
        return (path / DATA_FILE).is_file()
    if path.is_file():
        return path.name == DATA_FILE or is_lmdb_file(path)
    return False
