"""Numbered keys of a text-recognition LMDB, as runs: which numbers have an image, which a label.

clovaai's deep-text-recognition-benchmark, CRNN and PaddleOCR keep sample ``n`` under ``image-%09d`` (the encoded
image) and ``label-%09d`` (its text), numbered from 1, and the count under ``num-samples``; their loaders read
numbers 1..num-samples. The two halves of a sample sit far apart in key order (every image key sorts before every
label key), usually in different shards, so a shard keeps only runs of consecutive numbers stored at consecutive
positions (one run per kind for a healthy database, one more per gap) and the pairing is judged after the merge
(``checks/unpaired_record.py``, ``checks/sample_count_mismatch.py``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel, Field

from .location import Location
from .text import Text

IMAGE, LABEL = "image", "label"
PREFIXES = {b"image-": IMAGE, b"label-": LABEL}
COUNT_KEY = b"num-samples"
MAX_DIGITS = 18
"""Longer digit strings are no sample numbers (and would not fit the run's integers)."""
COUNT_SHOWN = 40
"""Bytes of a ``num-samples`` value kept for the report."""

Run = tuple[int, int, int, int]
"""(first number, how many, position of the first key, digits): keys ``{kind}-{n:0{digits}d}`` for ``n`` from
the first number on, stored at consecutive positions from the first key's."""
Span = tuple[int, int]
"""Numbers ``[start, stop)``."""


def key_of(kind: str, number: int, digits: int) -> str:
    return f"{kind}-{number:0{digits}d}"


class NumberedKeys(BaseModel):
    """The numbered keys of one database (by kind, as runs) and its ``num-samples`` record."""

    path: Text
    runs: dict[str, list[Run]] = Field(default_factory=dict)
    count: str | None = None
    """The ``num-samples`` value as text (bytes that are not UTF-8 spelled out), None without the record."""
    count_at: int | None = None
    """The position of the ``num-samples`` record."""

    def merged(self, other: NumberedKeys) -> NumberedKeys:
        kinds = sorted({*self.runs, *other.runs})
        runs = {kind: coalesce([*self.runs.get(kind, []), *other.runs.get(kind, [])]) for kind in kinds}
        first = self if self.count_at is not None else other
        return NumberedKeys.model_construct(path=self.path, runs=runs, count=first.count, count_at=first.count_at)


def coalesce(runs: Iterable[Run]) -> list[Run]:
    """Runs in a canonical order (digits, number), joined where one continues another in number and position:
    the same list whatever the shards that found them."""
    out: list[Run] = []
    for run in sorted(runs, key=lambda r: (r[3], r[0], r[2])):
        if out:
            first, count, pos, digits = out[-1]
            if run[3] == digits and run[0] == first + count and run[2] == pos + count:
                out[-1] = (first, count + run[1], pos, digits)
                continue
        out.append(run)
    return out


def spans(runs: Iterable[Run]) -> list[Span]:
    """The numbers the runs cover, as sorted disjoint spans (touching spans joined)."""
    return union((r[0], r[0] + r[1]) for r in runs)


def union(found: Iterable[Span]) -> list[Span]:
    """Spans as sorted disjoint spans (touching spans joined)."""
    out: list[Span] = []
    for start, stop in sorted(found):
        if out and start <= out[-1][1]:
            if stop > out[-1][1]:
                out[-1] = (out[-1][0], stop)
        else:
            out.append((start, stop))
    return out


def subtract(span: Span, other: list[Span]) -> Iterator[Span]:
    """The parts of ``span`` outside the sorted disjoint spans ``other``."""
    start, stop = span
    i = max(0, bisect_right(other, (start, 1 << 63)) - 1)
    while start < stop and i < len(other):
        lo, hi = other[i]
        if hi <= start:
            i += 1
            continue
        if lo >= stop:
            break
        if lo > start:
            yield start, lo
        start = max(start, hi)
        i += 1
    if start < stop:
        yield start, stop


def difference(left: list[Span], right: list[Span]) -> list[Span]:
    return [part for span in left for part in subtract(span, right)]


def size(found: Iterable[Span]) -> int:
    return sum(stop - start for start, stop in found)


def spans_text(found: list[Span], shown: int = 4) -> str:
    """``1-20, 22, 24-30``, and how many more spans."""
    parts = [f"{a}" if b - a == 1 else f"{a}-{b - 1}" for a, b in found[:shown]]
    if len(found) > shown:
        parts.append(f"and {len(found) - shown:,} more ranges")
    return ", ".join(parts)


def unpaired(runs: list[Run], other: list[Span], cap: int) -> tuple[int, list[tuple[int, int, int]]]:
    """Keys of ``runs`` whose number ``other`` does not cover: how many, and the first ``cap`` by position as
    (number, position, digits)."""
    total = 0
    first: list[tuple[int, int, int]] = []
    for number, count, pos, digits in sorted(runs, key=lambda r: r[2]):
        for a, b in subtract((number, number + count), other):
            total += b - a
            first.extend((n, pos + n - number, digits) for n in range(a, min(b, a + cap - len(first))))
    return total, first


def sample_count(text: str | None) -> int | None:
    """The sample count ``num-samples`` holds as the loaders read it (``int(value)``), None when it is none."""
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        return None
    return n if n >= 0 else None


@dataclass(slots=True)
class KeyNumbers:
    """The item a reader yields for the numbered keys it went through (``on_numbered_keys``)."""

    kind: ClassVar[str] = "numbered_keys"
    keys: NumberedKeys
    items: int = 0
    nbytes: int = 0


@dataclass(slots=True)
class Numbering:
    """Gathers numbered keys met in key order into runs (the reader's side)."""

    path: str
    runs: dict[str, list[list[int]]] = field(default_factory=dict)
    count: str | None = None
    count_at: int | None = None

    def add(self, key: bytes, pos: int) -> None:
        """Note ``key`` at ``pos`` when it is ``image-N`` or ``label-N``."""
        kind = PREFIXES.get(key[:6])
        digits = key[6:]
        if kind is None or not digits.isdigit() or len(digits) > MAX_DIGITS:
            return
        number, width = int(digits), len(digits)
        runs = self.runs.setdefault(kind, [])
        if runs:
            last = runs[-1]
            if last[3] == width and number == last[0] + last[1] and pos == last[2] + last[1]:
                last[1] += 1
                return
        runs.append([number, 1, pos, width])

    def add_count(self, value: bytes | memoryview, pos: int) -> None:
        raw = bytes(value[:COUNT_SHOWN])
        text = raw.decode("utf-8", "backslashreplace")
        self.count, self.count_at = (text + "…" if len(value) > COUNT_SHOWN else text), pos

    def __bool__(self) -> bool:
        return bool(self.runs) or self.count_at is not None

    def take(self) -> KeyNumbers:
        """What was gathered, as an item; starts afresh."""
        runs = {kind: [(r[0], r[1], r[2], r[3]) for r in found] for kind, found in self.runs.items()}
        keys = NumberedKeys(path=self.path, runs=runs, count=self.count, count_at=self.count_at)
        self.runs, self.count, self.count_at = {}, None, None
        return KeyNumbers(keys=keys)


def tally(item: KeyNumbers, numbered: dict[str, NumberedKeys]) -> None:
    """Add a reader's numbered keys to the partial's (the prepass of ``numbered_keys`` items)."""
    path = item.keys.path
    known = numbered.get(path)
    numbered[path] = item.keys if known is None else known.merged(item.keys)


def layout(keys: NumberedKeys) -> bool:
    """Whether the database is in the text-recognition layout: ``label-N`` records, or ``image-N`` records and a
    ``num-samples`` beside them."""
    return bool(keys.runs.get(LABEL)) or (keys.count_at is not None and bool(keys.runs.get(IMAGE)))


UNREAD = (
    "; parts of the database could not be read (see lmdb-corrupt): records there are not counted, and may be "
    "the ones missing here"
)
"""Added to a detail when the scan found damage."""


def count_location(keys: NumberedKeys, detail: str) -> Location:
    if keys.count_at is None:
        return Location(path=keys.path, detail=detail)
    return Location(path=keys.path, key=COUNT_KEY.decode(), index=keys.count_at, detail=detail)
