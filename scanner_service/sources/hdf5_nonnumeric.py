"""HDF5 datasets whose values are no numbers: encoded images, and the others read through for damage.

Encoded images are the bytes of one JPEG, PNG ... file per row, in one of three layouts: variable-length bytes
(``h5py.vlen_dtype(np.uint8)``, each row its file's length), opaque bytes of one size (``np.void``, HDF5's
OPAQUE class) and fixed-length byte strings (``S``), the last two padded with zero bytes to the longest file. A
dataset of one of these types, one value per row, most of whose sampled rows start like an image
(``holds_images``) is read a block of rows at a time; each row goes to the image checks as an ``EncodedImage``,
as an LMDB record of encoded images does. So is a 1-D ``uint8`` dataset that is one image file's bytes
(``np.frombuffer(f.read(), np.uint8)``, a dataset per image), and a dataset among siblings that are images.

Other values (text, opaque blobs, variable-length numbers, references) are not judged, but a loader that reads
them fails on a damaged chunk as it does on numbers: they are read through, and a block HDF5 cannot read is
``corrupt-chunk`` for its rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from ..records.image import image_format

ROWS_SAMPLED = 8
"""Rows looked at to tell whether a dataset of bytes holds images, and how large variable-length rows are:
spread over the dataset, so that an error page in the first row or a damaged first chunk decides nothing."""

IMAGE_MIN_BYTES = 16
"""The first bytes of a 1-D array of bytes looked at for an image's signature (and its least length)."""

SIZE_UNKNOWN = 1 << 16
"""Bytes a variable-length value is taken to hold when no sampled row can be read."""

IMAGE_BLOCK_ROWS = 16
"""Variable-length images read at a time: their sizes are known only once read, so a block holds at most this
many (memory stays within that many of the largest images, however small the sampled ones were)."""

VALUE_BLOCK_ROWS = 1024
"""Variable-length values read through at a time, at most."""


def bytes_type(dtype: np.dtype[Any]) -> bool:
    """Whether one value of ``dtype`` is a run of bytes: opaque, a fixed-length byte string, or variable-length
    8-bit integers."""
    if dtype.kind == "V":
        return not dtype.names and dtype.subdtype is None
    if dtype.kind == "S":
        return True
    base = h5py.check_vlen_dtype(dtype)
    return base is not None and np.dtype(base).kind in "iu" and np.dtype(base).itemsize == 1


@dataclass(frozen=True, slots=True)
class Sampled:
    """What planning keeps of a sampled value (never the value: a blob may be large): its first bytes (none for
    text and other values that are no run of bytes), its size, and its size before any trailing zero bytes."""

    head: bytes
    size: int
    filled: int


def sampled_rows(ds: h5py.Dataset) -> list[Sampled]:
    """Up to ``ROWS_SAMPLED`` values of ``ds``, the first value of rows spread evenly from the first; rows HDF5
    cannot read are left out (the reader reports them)."""
    rows = int(ds.shape[0]) if ds.shape else 1
    out = []
    for i in sorted({k * rows // ROWS_SAMPLED for k in range(min(rows, ROWS_SAMPLED))}):
        try:
            value = ds[()] if not ds.shape else ds[(i,) + (0,) * (ds.ndim - 1)]
        except Exception:  # a damaged chunk or heap
            continue
        if isinstance(value, np.ndarray | np.void | bytes):  # (np.bytes_ is bytes)
            raw = value.tobytes() if isinstance(value, np.ndarray | np.void) else bytes(value)
            out.append(Sampled(raw[:IMAGE_MIN_BYTES], len(raw), len(raw.rstrip(b"\0"))))
        else:
            size = value_size(value)
            out.append(Sampled(b"", size, size))
    return out


def image_kind(head: bytes, length: int, filled: int) -> str | None:
    """The format a value of ``length`` bytes that starts with ``head`` is, by a signature other data does not
    start with by chance; ``filled``: its bytes before any zero padding. A BMP's two letters count only when
    the file size after them lies between the two."""
    kind = image_format(head)
    if kind != "bmp":
        return kind
    return kind if len(head) >= 6 and filled <= int.from_bytes(head[2:6], "little") <= length else None


def holds_images(sample: list[Sampled]) -> bool:
    """Whether the sampled values of a dataset of bytes are encoded images: at least half of those that hold
    bytes start like one (an error page or an empty row among them does not decide)."""
    filled = [v for v in sample if v.filled]
    found = sum(image_kind(v.head, v.size, v.filled) is not None for v in filled)
    return found > 0 and 2 * found >= len(filled)


def file_image(ds: h5py.Dataset) -> bool:
    """Whether a 1-D dataset of bytes is one image file (``np.frombuffer(f.read(), np.uint8)``): it starts with a
    format's signature (``image_kind``)."""
    length = int(ds.shape[0])
    if length < IMAGE_MIN_BYTES:
        return False
    try:
        head = np.asarray(ds[:IMAGE_MIN_BYTES]).tobytes()
    except Exception:  # a damaged chunk: read as numbers, the reader reports it
        return False
    return image_kind(head, length, length) is not None


def starts_like_image(dsid: Any, length: int, dtype: np.dtype[Any]) -> bool:
    """``file_image`` through a dataset's low-level handle (the planning of small datasets opens no other)."""
    if length < IMAGE_MIN_BYTES:
        return False
    head = np.empty(IMAGE_MIN_BYTES, dtype)  # (its own type: HDF5 would clip a signed byte read as unsigned)
    space = dsid.get_space()
    space.select_hyperslab((0,), (IMAGE_MIN_BYTES,))
    dsid.read(h5py.h5s.create_simple((IMAGE_MIN_BYTES,)), space, head)
    return image_kind(head.tobytes(), length, length) is not None


def one_per_row(shape: tuple[int, ...] | None) -> bool:
    """A shape of one value per row: a scalar (one image), ``(N,)`` or ``(N, 1)``."""
    return shape is not None and math.prod(shape[1:]) == 1


def row_size(ds: h5py.Dataset, sample: list[Sampled] | None = None) -> int:
    """Bytes per row, for sizing shards and blocks: from the item size of fixed-size values; for values h5py
    hands over as objects (variable-length ones, text, references), the largest of the sampled rows (a guess:
    the reader learns the sizes as it reads)."""
    per_row = math.prod(ds.shape[1:]) if ds.shape else 1
    if ds.dtype.kind != "O":
        return max(1, per_row * int(ds.dtype.itemsize))
    values = sampled_rows(ds) if sample is None else sample
    if not values:
        return per_row * SIZE_UNKNOWN
    return max(1, per_row * max(v.size for v in values))


def value_size(value: Any) -> int:
    """Bytes of one value h5py hands over as an object (an array, bytes, text; 8 for a reference)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    return len(value) if hasattr(value, "__len__") else 8


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
    """Whether a value is zero bytes only (none included): in a fixed-size slot, one no image was written to
    (it reads as empty)."""
    return not bytes(value[:16]).strip(b"\0") and not bytes(value).strip(b"\0")
