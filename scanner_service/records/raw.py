"""``raw:DTYPE:SHAPE`` values: bare numbers of a declared type and shape (``raw:float32:3x32x32``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True, slots=True)
class RawSpec:
    dtype: np.dtype[Any]
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def shape_text(self) -> str:
        return "x".join(map(str, self.shape))

    def __str__(self) -> str:
        return f"raw:{self.dtype.name}:{self.shape_text}"


def parse_raw(spec: str) -> RawSpec:
    """``raw:float32:3x32x32`` (dtype any numpy numeric name, e.g. uint8, <f4, float16; shape ``AxBxC`` or
    ``A,B,C``)."""
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] != "raw":
        raise ConfigError(f"decoder {spec!r}: expected raw:DTYPE:SHAPE, e.g. raw:float32:3x32x32")
    try:
        dtype = np.dtype(parts[1])
    except TypeError:
        raise ConfigError(f"decoder {spec!r}: unknown dtype {parts[1]!r}") from None
    if dtype.kind not in "biuf" or dtype.hasobject:
        raise ConfigError(f"decoder {spec!r}: dtype {parts[1]!r} is not a numeric type")
    try:
        shape = tuple(int(n) for n in parts[2].lower().replace(",", "x").split("x"))
    except ValueError:
        raise ConfigError(f"decoder {spec!r}: shape {parts[2]!r} is not like 3x32x32") from None
    if not shape or any(n <= 0 for n in shape):
        raise ConfigError(f"decoder {spec!r}: shape dimensions must be positive")
    return RawSpec(dtype, shape)
