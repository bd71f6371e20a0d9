"""``.npy`` values (``np.save`` format): the header is parsed without ever unpickling anything.

Format: ``\\x93NUMPY``, major and minor version bytes, a little-endian header length (2 bytes in version 1,
4 bytes in versions 2 and 3), then a Python dict literal ``{'descr': ..., 'fortran_order': ..., 'shape': ...}``
read with ``ast.literal_eval`` (literals only, no code). Object arrays hold pickles: they are reported,
never loaded.
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

MAGIC = b"\x93NUMPY"
MAX_HEADER = 1 << 16


class NpyError(ValueError):
    """A value that is no readable .npy blob (the message says why)."""


class NpyPickled(NpyError):
    """An object array: its data is a pickle, which dscan does not load."""


@dataclass(frozen=True, slots=True)
class NpyHeader:
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran: bool
    offset: int
    """Where the array's bytes start in the value."""

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def shape_text(self) -> str:
        return "x".join(map(str, self.shape)) if self.shape else "scalar"


def is_npy(value: bytes | memoryview) -> bool:
    return bytes(value[:6]) == MAGIC


def header_span(value: bytes | memoryview) -> int:
    """Length of the magic, version, length field and header dict: where the data starts."""
    if len(value) < 10 or bytes(value[:6]) != MAGIC:
        raise NpyError("no .npy magic (\\x93NUMPY)")
    major = value[6]
    if major == 1:
        return 10 + (value[8] | value[9] << 8)
    if major in (2, 3):
        if len(value) < 12:
            raise NpyError("truncated .npy header")
        return 12 + int.from_bytes(bytes(value[8:12]), "little")
    raise NpyError(f"unknown .npy format version {major}.{value[7]}")


@functools.lru_cache(maxsize=1024)
def parse_header(head: bytes) -> NpyHeader:
    """Parse the header bytes (``value[:header_span(value)]``); cached: records of a dataset share one."""
    major = head[6]
    start = 10 if major == 1 else 12
    if len(head) > MAX_HEADER + start:
        raise NpyError("oversized .npy header")
    try:
        text = head[start:].decode("latin1" if major < 3 else "utf-8")
        meta = ast.literal_eval(text)
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        raise NpyError("unreadable .npy header dict") from None
    if not isinstance(meta, dict) or set(meta) != {"descr", "fortran_order", "shape"}:
        raise NpyError("the .npy header is not {'descr', 'fortran_order', 'shape'}")
    shape, fortran = meta["shape"], meta["fortran_order"]
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise NpyError(f"bad .npy shape {shape!r}")
    if not isinstance(fortran, bool):
        raise NpyError("bad .npy fortran_order")
    try:
        dtype = np.lib.format.descr_to_dtype(meta["descr"])
    except (TypeError, ValueError) as exc:
        raise NpyError(f"bad .npy dtype {meta['descr']!r}: {exc}") from None
    if dtype.hasobject:
        raise NpyPickled("object array: its data is a pickle")
    return NpyHeader(dtype, shape, fortran, len(head))


def read_header(value: bytes | memoryview) -> NpyHeader:
    """The header of a .npy value; raises NpyError (NpyPickled for object arrays)."""
    span = header_span(value)
    if span > len(value):
        raise NpyError("truncated .npy header")
    return parse_header(bytes(value[:span]))


def as_array(value: bytes | memoryview, header: NpyHeader) -> np.ndarray[Any, Any]:
    """The array of a value whose size matches its header (C order, a view of ``value`` where possible)."""
    data = np.frombuffer(value, header.dtype, count=math.prod(header.shape), offset=header.offset)
    if header.fortran:
        return data.reshape(header.shape[::-1]).T
    return data.reshape(header.shape)
