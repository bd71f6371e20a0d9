"""The columns of a structured NumPy dtype (an HDF5 compound type, as h5py maps it): its leaf fields, however
deeply nested. ``[("pos", [("x", "f4"), ("y", "f4")]), ("label", "i8")]`` has the columns ``['pos']['x']``,
``['pos']['y']`` and ``['label']``: a field that is itself a table is no column, its fields are, so that a NaN in
``pos.y`` is found at its row instead of a whole ``pos`` being passed over. A column is named by its path of field
names, and read from a block of records as ``block[f1][f2]``: for a flat field, the name and the read are the ones
a single field always had (``['x']``, ``block['x']``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

FieldPath = tuple[str, ...]
"""The field names from the record down to one column: ``("pos", "y")``."""


def leaf_fields(dtype: np.dtype[Any]) -> Iterator[tuple[FieldPath, np.dtype[Any]]]:
    """Every leaf field of a structured ``dtype`` in storage order, with its dtype as ``block[f1][f2]`` yields
    per record: the shapes of sub-array fields on the way multiply in (a field of 3 points of ``x`` and ``y``
    gives ``x`` as 3 values per record), as NumPy and h5py index them."""
    for name in dtype.names or ():
        sub = dtype[name]
        if not sub.base.names:
            yield (name,), sub
            continue
        for path, leaf in leaf_fields(sub.base):
            yield (name, *path), np.dtype((leaf.base, (*sub.shape, *leaf.shape)))


def field_dtype(dtype: np.dtype[Any], path: FieldPath) -> np.dtype[Any]:
    """The dtype of the column ``path`` of ``dtype``, as ``leaf_fields`` gives it (the shapes on the way in)."""
    shape: tuple[int, ...] = ()
    for name in path:
        sub = dtype[name]
        shape, dtype = (*shape, *sub.shape), sub.base
    return np.dtype((dtype, shape))


def field_text(path: FieldPath) -> str:
    """How locations name a column: ``['pos']['y']`` (``['x']`` for a flat field, as always)."""
    return "".join(f"['{name}']" for name in path)


def pick(records: Any, path: FieldPath) -> Any:
    """The column ``path`` of a block of records: ``records[f1][f2]`` (a view, no copy)."""
    for name in path:
        records = records[name]
    return records


__all__ = ["FieldPath", "field_dtype", "field_text", "leaf_fields", "pick"]
