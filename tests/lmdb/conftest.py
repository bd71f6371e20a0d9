"""LMDB builders for the tests: real environments written with py-lmdb, values from the real encoders."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import pytest
from PIL import Image

from scanner_service.records.datum import datum_class


def write_env(path: Path, records: Iterable[tuple[bytes | str, bytes]], subdir: bool = True) -> Path:
    """Write ``records`` (key, value) into a new environment at ``path``; remove the lock file afterwards.

    Returns the environment's folder (or its data file when ``subdir`` is False).
    """
    items = [(k.encode() if isinstance(k, str) else k, v) for k, v in records]
    size = sum(len(k) + len(v) + 64 for k, v in items) * 2 + (1 << 22)
    (path if subdir else path.parent).mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path), map_size=size, subdir=subdir, lock=True)
    with env.begin(write=True) as txn:
        for key, value in items:
            txn.put(key, value)
    env.sync()
    env.close()
    lock = path / "lock.mdb" if subdir else Path(f"{path}-lock")
    lock.unlink(missing_ok=True)
    return path


def key(i: int) -> str:
    return f"{i:08d}"


def datum(
    shape: tuple[int, int, int] = (3, 8, 8),
    label: int | None = 0,
    data: bytes | None = None,
    floats: np.ndarray[Any, Any] | None = None,
    encoded: bool | None = None,
    seed: int = 0,
) -> bytes:
    """A serialised Caffe Datum: raw uint8 pixels by default, float_data when ``floats`` is given."""
    c, h, w = shape
    fields: dict[str, Any] = {"channels": c, "height": h, "width": w}
    if floats is not None:
        fields["float_data"] = np.asarray(floats, np.float32).reshape(-1).tolist()
    else:
        if data is None:
            data = np.random.default_rng(seed).integers(0, 256, c * h * w, dtype=np.uint8).tobytes()
        fields["data"] = data
    if label is not None:
        fields["label"] = label
    if encoded is not None:
        fields["encoded"] = encoded
    return bytes(datum_class()(**fields).SerializeToString())


def jpeg(seed: int = 0, size: tuple[int, int] = (48, 40)) -> bytes:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0 : size[1], 0 : size[0]]
    pixels = np.stack([(x * 5) % 256, (y * 5) % 256, (x + y) % 256], axis=-1).astype(np.uint8)
    pixels = np.clip(pixels.astype(int) + rng.integers(-8, 8, pixels.shape), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=90)
    return out.getvalue()


def npy(array: np.ndarray[Any, Any]) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def pickled(obj: Any, protocol: int = 4) -> bytes:
    return pickle.dumps(obj, protocol=protocol)


def tree_state(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder`` with its size, mtime (ns) and SHA-256: to prove nothing changed."""
    out = {}
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        st = os.stat(p)
        out[str(p)] = (st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


@pytest.fixture
def make_env(tmp_path: Path) -> Callable[..., Path]:
    def make(records: Iterable[tuple[bytes | str, bytes]], name: str = "train_lmdb", subdir: bool = True) -> Path:
        return write_env(tmp_path / name, records, subdir=subdir)

    return make


@pytest.fixture
def datum_env(make_env: Callable[..., Path]) -> Callable[..., Path]:
    """``n`` clean raw Datums (3x8x8), labels ``i % classes``, plus ``extra`` records by key."""

    def make(n: int = 200, classes: int = 5, extra: dict[str, bytes] | None = None, **kw: Any) -> Path:
        records = {key(i): datum(label=i % classes, seed=i) for i in range(n)}
        records.update(extra or {})
        return make_env(sorted(records.items()), **kw)

    return make


# -- damage: LMDB's on-disk format (64-bit builds), just enough to hit a chosen page or record ---------------

PAGE_HEADER = 16
P_BRANCH, P_LEAF, P_OVERFLOW = 0x01, 0x02, 0x04


def page_size(env_path: Path) -> int:
    env = lmdb.open(str(env_path), readonly=True, lock=False)
    try:
        return int(env.stat()["psize"])
    finally:
        env.close()


def page_flags(data: bytes, page: int, psize: int) -> int:
    return int.from_bytes(data[page * psize + 10 : page * psize + 12], "little")


def leaf_keys(data: bytes, page: int, psize: int) -> list[bytes]:
    """The keys of a leaf page, in order."""
    base = page * psize
    lower = int.from_bytes(data[base + 12 : base + 14], "little")
    keys = []
    for i in range((lower - PAGE_HEADER) // 2):
        node = base + int.from_bytes(data[base + PAGE_HEADER + 2 * i : base + PAGE_HEADER + 2 * i + 2], "little")
        size = int.from_bytes(data[node + 6 : node + 8], "little")
        keys.append(bytes(data[node + 8 : node + 8 + size]))
    return keys


def leaf_of(data: bytes, key: bytes, psize: int) -> int:
    """The page number of the leaf holding ``key``."""
    for page in range(2, len(data) // psize):
        if page_flags(data, page, psize) == P_LEAF and key in leaf_keys(data, page, psize):
            return page
    raise LookupError(key)


def node_of(data: bytes, key: bytes) -> int:
    """Offset of the leaf node of ``key`` (its header: data size lo, hi, flags, key size, then the key)."""
    for flags in (1, 0):
        at = data.find(flags.to_bytes(2, "little") + len(key).to_bytes(2, "little") + key)
        if at >= 0:
            return at - 4
    raise LookupError(key)


def patch(path: Path, offset: int, new: bytes) -> None:
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(new)
