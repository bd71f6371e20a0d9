"""What a source's reader yields for one shard: blocks of numbers, labels, and read failures.

Items never leave the process that reads them (only partials do), so they may hold callables.
Each item kind names the check hook that consumes it: a check module's ``on_<kind>`` function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .location import Location

if TYPE_CHECKING:
    from .imaging.verdict import Verdict

Locate = Callable[[int], Location]


@dataclass(frozen=True, slots=True)
class DatasetMeta:
    """A numeric dataset as the statistics see it: where, what type, which axis holds channels."""

    stats_key: str
    path: str
    dataset: str
    dtype: str
    shape: tuple[int, ...]
    channel_axis: int | None
    channels: int
    missing: tuple[float, ...] = ()
    """Values the dataset declares missing (netCDF/CF ``_FillValue``, ``missing_value``), as its dtype holds them."""
    rows_from_blocks: bool = False
    """The samples are counted as blocks come (an LMDB shape: its records of that shape), not taken from
    ``shape[0]``, which is then the number of records in the database."""
    sample_shape: tuple[int, ...] | None = None
    """Set for a dataset that is ONE sample of a role (one group per sample: ``/sample_*/image``): the role's
    sample shape (-1 along an axis whose length varies). ``shape`` is then (1, *the dataset's shape), the channel
    axis counts in it, and ``stats_key`` and ``dataset`` name the role: its datasets share one set of statistics,
    which counts them as its samples."""


@dataclass(slots=True)
class NumericBlock:
    """A block of a numeric dataset: ``data[0, ...]`` is sample ``offset[0]`` of the dataset.

    ``offset`` gives the block's start along every axis (a chunk may cover part of the channels).
    ``locate(i)`` names sample ``i`` of the block. ``items`` counts the samples it completes (progress).
    """

    kind: ClassVar[str] = "numeric"
    meta: DatasetMeta
    data: np.ndarray[Any, Any]
    offset: tuple[int, ...]
    locate: Locate
    items: int = 0
    nbytes: int = 0
    chunk: str | None = None


@dataclass(slots=True)
class NumericBatch:
    """Many small numeric datasets of one type and shape, read together: ``data[j]`` is the whole of the
    dataset ``metas[j]`` (``locates[j]`` names its samples). Per-item work (a block, running moments, hooks)
    would cost more than reading such a dataset: the batch is judged at once, and a dataset where a check
    may find something goes through the per-block path on its own (``stacked.summarize_batch``)."""

    kind: ClassVar[str] = "numeric_batch"
    metas: list[DatasetMeta]
    data: np.ndarray[Any, Any]
    locates: list[Locate]
    items: int = 0
    nbytes: int = 0


@dataclass(slots=True)
class LabelBlock:
    """Consecutive class labels of a label stream (class ids, or rows of a one-hot array), ``global_start``
    being the first one's position."""

    kind: ClassVar[str] = "labels"
    stream: str
    labels: np.ndarray[Any, Any]
    global_start: int
    locate: Locate
    items: int = 0
    nbytes: int = 0
    onehot: bool = False
    """``labels`` is N×K rows of 0/1 values (one-hot or multi-hot), not N class ids."""


@dataclass(slots=True)
class ReadFailure:
    """A part of the dataset that could not be read: becomes a finding with ``code``."""

    kind: ClassVar[str] = "failure"
    code: str
    location: Location
    items: int = 0
    nbytes: int = 0
    values: int = 1


@dataclass(slots=True)
class Note:
    """Information about the scan itself (decoder versions ...) recorded in the report."""

    kind: ClassVar[str] = "note"
    info: dict[str, str] = field(default_factory=dict)
    items: int = 0
    nbytes: int = 0


@dataclass(slots=True)
class EncodedImage:
    """An encoded image (a file, or the value of a record): the image checks judge its bytes.

    ``location`` names it (file path and list line, or LMDB key); ``name`` is the file name whose
    extension the content must match ('' when there is none, as for LMDB values); ``label`` its class (a
    class name where a record stores one instead of a class id);
    ``split`` the split folder (``train``, ``val`` ...) of an image folder with splits.
    ``verdict``: the image's verdict, when a head start judged these bytes before the scan; ``digest``: the
    xxh3-64 digest of ``data`` (hex), when it was computed already.
    """

    kind: ClassVar[str] = "image"
    data: bytes | memoryview
    location: Location
    name: str = ""
    label: int | str | None = None
    split: str | None = None
    items: int = 1
    nbytes: int = 0
    verdict: Verdict | None = None
    digest: str | None = None
    padded: bool = False
    """Stored in a slot of one size (an HDF5 dataset of fixed-size bytes): zero bytes after the image's end are
    the storage's padding, not trailing data."""
