"""What every dataset format implements: detect, describe, plan into shards, read a shard.

A source never raises for a damaged part of the dataset: unreadable files, chunks and records are
``ReadFailure`` items (read time) or findings in the plan's partial (plan time). An exception from a
source means the dataset cannot be scanned at all (``SourceError``).
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

from ..config import ScanConfig
from ..location import Location
from ..partial import Partial
from ..text import Text
from .walk import Outside, fence

if TYPE_CHECKING:
    import numpy as np

    from ..head_start import HeadStart


class Rows:
    """``rows`` and ``row_bytes`` of an array known by its ``shape`` and ``dtype`` (a 0-d array is one row): the
    planning records of the array formats (HDF5 datasets, NumPy arrays) derive from it."""

    __slots__ = ()
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def row_bytes(self) -> int:
        return int(math.prod(self.shape[1:])) * self.dtype.itemsize if self.shape else self.dtype.itemsize


def block_rows(row_bytes: int, block_bytes: int, step: int = 1) -> int:
    """Rows an array's reader takes into memory at a time: about ``block_bytes``, in whole steps of ``step`` rows
    (an HDF5 dataset's chunk rows), at least one step."""
    return max(step, max(1, block_bytes // max(1, row_bytes)) // step * step)


def shard_rows(row_bytes: int, shard_bytes: int, block_bytes: int, step: int = 1) -> int:
    """Rows of an array per shard: about ``shard_bytes``, in whole steps, and in whole blocks when a shard holds
    one or more. Each shard's reader takes its blocks from the shard's first row, so shards of whole blocks
    give every block the same rows whatever the shard size, and a float32 block's sums (which depend on
    which rows they add) the same values: the statistics do not change with ``shard_bytes``."""
    per = max(step, max(1, shard_bytes // max(1, row_bytes)) // step * step)
    block = block_rows(row_bytes, block_bytes, step)
    return per // block * block if per >= block else per


Item = Any
"""One of the item classes of ``scanner_service.items`` (or a format's own, with a ``kind``)."""


class SourceInfo(BaseModel):
    """The dataset as a whole: what it is and how big."""

    kind: str
    path: Text
    """The path as given, made absolute."""
    root: Text
    """The folder locations are relative to."""
    files: int = 0
    items: int = 0
    bytes: int = 0


class Shard(BaseModel):
    """A unit of work: a part of the dataset that one worker reads start to end, in bounded memory."""

    id: int
    items: int = 0
    bytes: int = 0
    spec: dict[str, Any] = Field(default_factory=dict)
    """Format-specific, JSON-serialisable description of the part (files, datasets, row or key ranges)."""


class Plan(BaseModel):
    source: SourceInfo
    shards: list[Shard]
    partial: Partial
    """What planning already found (unreadable files, list errors, length mismatches)."""


class Source(ABC):
    """A dataset in one format. Instances are cheap; ``plan`` and ``read`` do the I/O."""

    kind: ClassVar[str]
    early_readers: ClassVar[bool] = False
    """Whether reader processes may start while the plan is made: planning imports nothing they need (an
    HDF5 or LMDB plan imports h5py or lmdb, which readers started after it inherit)."""

    def __init__(self, path: Path, config: ScanConfig) -> None:
        self.path = path
        self.config = config
        self.fenced: Outside | None = fence(config.confine)
        """Whether a path resolves outside a confined scan's roots (None: the scan is not confined)."""

    def listed_files(self) -> list[Path]:
        """The files a scan reads that are not below ``path``: a list's entries (none for most formats)."""
        return []

    def outside(self, path: Path | str) -> str | None:
        """Why ``path`` must not be read: it resolves (symlinks followed) outside ``config.confine``. None
        when it may be read, or when the scan is not confined. Checked before a file is even looked at, so a
        confined scan says nothing about files elsewhere (not even whether they exist)."""
        if self.fenced is None or not self.fenced(os.fspath(path)):
            return None
        return "it resolves outside the allowed data roots (a link out of the dataset?): not read"

    @classmethod
    @abstractmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        """Whether ``path`` is a dataset of this format (cheap: names and magic bytes only)."""

    @classmethod
    def warm_up(cls) -> None:
        """Import what reading needs, for a source whose readers start before the plan (``early_readers``):
        the command calls it before it forks the first reader, which inherits the imports, as every later one
        does; each reader calls it again when it starts (nothing left to do, but in a reader of the fork
        server). Nothing by default."""
        return None

    def adopt(self, shards: list[Shard], head_start: HeadStart) -> None:
        """Hand the verdicts of a head start to the shards that read those files (image folders); by default,
        nothing to take."""
        return None

    @property
    def root(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent

    def relative(self, path: Path) -> str:
        """``path`` relative to the scanned root, POSIX form."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    @abstractmethod
    def plan(self) -> Plan:
        """Split the dataset into shards of about ``config.shard_bytes`` each."""

    @abstractmethod
    def read(self, shard: Shard) -> Iterator[Item]:
        """Yield the shard's items in storage order, holding at most a few blocks in memory."""

    def split(self, shard: Shard) -> list[Shard]:
        """Smaller shards covering ``shard`` (used to isolate a part that crashes its reader); [] if none."""
        return []

    def crash_finding(self, shard: Shard, reason: str) -> tuple[str, Location]:
        """The finding for a shard that kills its reader process every time (after splitting)."""
        return "S001", Location(path=str(shard.spec.get("file", ".")), detail=reason)


NAMES_SHOWN = 5
"""Names a note lists (then how many more)."""


def listed_names(names: list[str]) -> str:
    """The first ``NAMES_SHOWN`` of ``names``, and how many more, for a note."""
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    return ", ".join(names[:NAMES_SHOWN]) + more


UNUSED_LABELS = "labels.option"
"""The report note of a ``labels`` option that the kind of dataset has no use for."""


def note_unused_labels(partial: Partial, config: ScanConfig, where: str) -> None:
    """Say in a note that ``config.labels`` was not used (an image folder's labels are its class folders), where
    a user set it: the label checks ran on the labels ``where`` says, not on what the option names."""
    if config.labels:
        partial.info[UNUSED_LABELS] = (
            f"labels {config.labels!r} not used: {where} (the option names an HDF5 label dataset, a NumPy label "
            "array or a CSV list's label column)"
        )


def segment_shard(index: int, segments: list[dict[str, Any]]) -> Shard:
    """A shard of row ranges (``segments``: each with ``start``, ``stop``, ``bytes`` and its ``file``)."""
    return Shard(
        id=index,
        items=sum(s["stop"] - s["start"] for s in segments),
        bytes=sum(s["bytes"] for s in segments),
        spec={"segments": segments, "file": segments[0]["file"]},
    )


def pack_segments(segments: list[dict[str, Any]], shard_bytes: int) -> list[Shard]:
    """Consecutive row ranges packed into shards of about ``shard_bytes`` each (a range is never split here)."""
    shards: list[Shard] = []
    current: list[dict[str, Any]] = []
    size = 0
    for seg in segments:
        if current and size + seg["bytes"] > shard_bytes:
            shards.append(segment_shard(len(shards), current))
            current, size = [], 0
        current.append(seg)
        size += seg["bytes"]
    if current:
        shards.append(segment_shard(len(shards), current))
    return shards
