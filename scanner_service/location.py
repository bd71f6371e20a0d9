"""Where a finding is: enough to go from the report to the bad sample in one step."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from .text import Text

_NUMBERS = re.compile(r"(\d+)")

NaturalKey = tuple[tuple[str, int], ...]


def natural(text: str | None) -> NaturalKey:
    """A sort key that orders the numbers inside a text by value: ``class 3`` before ``class 10``."""
    if not text:
        return ()
    parts = _NUMBERS.split(text)
    return tuple((parts[i], int(parts[i + 1]) if i + 1 < len(parts) else -1) for i in range(0, len(parts), 2))


class Location(BaseModel):
    """A place in the dataset. ``path`` is relative to the scanned root, in POSIX form."""

    model_config = ConfigDict(frozen=True)

    path: Text
    dataset: Text | None = None
    index: int | None = None
    key: Text | None = None
    line: int | None = None
    chunk: Text | None = None
    detail: Text | None = None

    def sort_key(self) -> tuple[str, str, int, str, int, NaturalKey, NaturalKey]:
        """Storage order: file, dataset, index, key (as stored), line; then the numbers in the chunk and the
        detail by value (``class 3`` before ``class 10``)."""
        return (
            self.path,
            self.dataset or "",
            -1 if self.index is None else self.index,
            self.key or "",
            -1 if self.line is None else self.line,
            natural(self.chunk),
            natural(self.detail),
        )

    def short(self) -> str:
        """One-line human form: ``file.h5:/data[12]``, ``train.txt:7``, ``data.mdb key 00000042``."""
        text = "" if self.path == "." and (self.dataset or self.key) else self.path
        if self.line is not None:
            text += f":{self.line}"
        if self.dataset:
            text += f":{self.dataset}" if text else self.dataset
        if self.index is not None:
            text += f"[{self.index}]"
        if self.chunk:
            text += f" chunk {self.chunk}"
        if self.key is not None:
            text += f" key {self.key}"
        return text
