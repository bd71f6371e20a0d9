"""HDF5 datasets whose values are no numbers: encoded images, and the others read through for damage.

Encoded images are the bytes of one JPEG, PNG ... file per row, in one of three layouts: variable-length bytes
(``h5py.vlen_dtype(np.uint8)``, each row its file's length), opaque bytes of one size (``np.void``, HDF5's
OPAQUE class) and fixed-length byte strings (``S``), the last two padded with zero bytes to the longest file. A
dataset of one of these types, one value per row, whose first value starts like an image is read a block of
rows at a time; each row goes to the image checks as an ``EncodedImage``, as an LMDB record of encoded images
does. So is a 1-D ``uint8`` dataset that is one image file's bytes (``np.frombuffer(f.read(), np.uint8)``, a
dataset per image).

Other values (text, opaque blobs, variable-length numbers, references) are not judged, but a loader that reads
them fails on a damaged chunk as it does on numbers: they are read through, and a block HDF5 cannot read is
``corrupt-chunk`` for its rows.
"""

from __future__ import annotations

import math
from typing import Any

import h5py
import numpy as np

from ..records.image import image_format

ROWS_SAMPLED = 8
"""Variable-length rows whose sizes plan the shards and blocks (the first ones: a row's size is known only
once it is read)."""

IMAGE_MIN_BYTES = 16
"""The first bytes of a 1-D array of bytes looked at for an image's signature (and its least length)."""

SIZE_UNKNOWN = 1 << 16
"""Bytes a variable-length value is taken to hold when the first rows cannot be read."""


def bytes_type(dtype: np.dtype[Any]) -> bool:
    """Whether one value of ``dtype`` is a run of bytes: opaque, a fixed-length byte string, or variable-length
    8-bit integers."""
    if dtype.kind == "V":
        return not dtype.names and dtype.subdtype is None
    if dtype.kind == "S":
        return True
    base = h5py.check_vlen_dtype(dtype)
    return base is not None and np.dtype(base).kind in "iu" and np.dtype(base).itemsize == 1


def first_image(ds: h5py.Dataset) -> str | None:
    """The format (``jpeg``, ``png`` ...) that the first value of a dataset of bytes starts like, else None (a
    first value HDF5 cannot read included: the dataset is then only named as not scanned)."""
    try:
        first = ds[(0,) * ds.ndim]
    except Exception:  # a damaged chunk, a damaged heap: the reader would name no image anyway
        return None
    return image_format(first.tobytes() if isinstance(first, np.ndarray | np.void) else bytes(first))


def file_image(ds: h5py.Dataset) -> bool:
    """Whether a 1-D dataset of bytes is one image file (``np.frombuffer(f.read(), np.uint8)``): it starts with a
    format's signature, one that numbers do not start with by chance (a BMP's two letters only when the file size
    after them is the dataset's length)."""
    if ds.shape[0] < IMAGE_MIN_BYTES:
        return False
    try:
        head = np.asarray(ds[:IMAGE_MIN_BYTES]).tobytes()
    except Exception:  # a damaged chunk: read as numbers, the reader reports it
        return False
    kind = image_format(head)
    if kind == "bmp":
        return int.from_bytes(head[2:6], "little") == int(ds.shape[0])
    return kind is not None


def one_per_row(shape: tuple[int, ...] | None) -> bool:
    """A shape of one value per row: a scalar (one image), ``(N,)`` or ``(N, 1)``."""
    return shape is not None and math.prod(shape[1:]) == 1


def row_size(ds: h5py.Dataset) -> int:
    """Bytes per row, for sizing shards and blocks: from the item size of fixed-size values; for values h5py
    hands over as objects (variable-length ones, text, references), the largest of the first ``ROWS_SAMPLED``
    rows (a guess: a block holds whole rows, and larger rows later make it larger)."""
    per_row = math.prod(ds.shape[1:]) if ds.shape else 1
    if ds.dtype.kind != "O":
        return max(1, per_row * int(ds.dtype.itemsize))
    try:
        first = ds[()] if not ds.shape else ds[: min(ROWS_SAMPLED, ds.shape[0])]
    except Exception:  # damage: the reader reports it; the guess only sizes blocks
        return per_row * SIZE_UNKNOWN
    values = [first] if not ds.shape else list(np.asarray(first, dtype=object).reshape(-1))
    return max(1, per_row * max((len(v) if hasattr(v, "__len__") else 8 for v in values), default=1))


def row_values(block: Any, dtype: np.dtype[Any]) -> list[bytes | memoryview]:
    """The bytes of each row of ``block``, as h5py read it: a view into the block for fixed-size values (with
    their zero padding), each value's own bytes for variable-length ones."""
    data = np.asarray(block).reshape(-1)
    if dtype.kind in "SV":
        size = dtype.itemsize
        raw = np.ascontiguousarray(data).view(np.uint8).data
        return [raw[i * size : (i + 1) * size] for i in range(len(data))]
    return [np.ascontiguousarray(v, np.uint8).data for v in data]


def blank(value: bytes | memoryview) -> bool:
    """Whether a fixed-size value is zero bytes only: a slot no image was written to (it reads as empty)."""
    return not bytes(value[:16]).strip(b"\0") and not bytes(value).strip(b"\0")
