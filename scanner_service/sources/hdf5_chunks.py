"""Where each chunk of a chunked HDF5 dataset lies in the file: one walk of the chunk index per dataset.

Asking HDF5 for one chunk's address (``get_chunk_info_by_coord``) costs about 50 µs, as much as reading a
1 MB chunk from the page cache; walking the whole index once (``H5Dchunk_iter``) costs about 1.5 µs a
chunk. A worker process reads many shards of the same dataset, so it keeps the last few indexes.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_CHUNKS = 1 << 22
"""Datasets with more chunks than this (24 bytes each) are looked up chunk by chunk instead."""

KEEP = 4
"""Indexes kept per process."""


@dataclass(slots=True)
class ChunkIndex:
    """File offset, stored size and filter mask of every chunk, by chunk number (row-major chunk grid)."""

    grid: tuple[int, ...]
    chunks: tuple[int, ...]
    offsets: np.ndarray[Any, Any]
    """int64; -1 for a chunk that was never written (it reads as the fill value)."""
    sizes: np.ndarray[Any, Any]
    masks: np.ndarray[Any, Any]

    def number(self, offset: tuple[int, ...]) -> int:
        n = 0
        for o, c, g in zip(offset, self.chunks, self.grid, strict=True):
            n = n * g + o // c
        return n

    def lookup(self, offset: tuple[int, ...]) -> tuple[int | None, int, int]:
        """(file offset or None when unwritten, stored size, filter mask) of the chunk at ``offset``."""
        i = self.number(offset)
        at = int(self.offsets[i])
        return (None if at < 0 else at), int(self.sizes[i]), int(self.masks[i])


_cache: OrderedDict[tuple[Any, ...], ChunkIndex] = OrderedDict()


def chunk_index(ds: Any, path: str) -> ChunkIndex | None:
    """The chunk index of the h5py dataset ``ds`` of the file at ``path``; None when HDF5 cannot walk it."""
    shape = tuple(int(n) for n in ds.shape)
    chunks = tuple(int(c) for c in ds.chunks)
    grid = tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))
    count = math.prod(grid)
    if count > MAX_CHUNKS or not hasattr(ds.id, "chunk_iter"):
        return None
    st = os.stat(path)
    key = (path, ds.name, st.st_ino, st.st_size, st.st_mtime_ns)
    found = _cache.get(key)
    if found is not None:
        _cache.move_to_end(key)
        return found
    index = ChunkIndex(
        grid,
        chunks,
        np.full(count, -1, np.int64),
        np.zeros(count, np.int64),
        np.zeros(count, np.uint32),
    )

    def visit(info: Any) -> None:
        i = index.number(tuple(info.chunk_offset))
        if info.byte_offset is not None:
            index.offsets[i] = info.byte_offset
            index.sizes[i] = info.size
            index.masks[i] = info.filter_mask

    try:
        ds.id.chunk_iter(visit)
    except (RuntimeError, ValueError, OSError, IndexError):  # a damaged index: ask chunk by chunk
        return None
    _cache[key] = index
    while len(_cache) > KEEP:
        _cache.popitem(last=False)
    return index
