"""Reading one shard of an LMDB environment: the readers of each decoder, from the pages or through LMDB.

``_DatumReader.run_direct`` reads a shard planned from the pages: the records are located in its leaf pages
(``lmdb_pages.leaf_records``), their values read a window at a time (``_Pages``), and records laid out like the
ones before them are recognised with vectorised byte comparisons (``_match_raw``, ``_match_floats``); the
others are parsed in full. ``_Reader.run`` reads through LMDB's cursor (``buffers=True``): the other decoders,
and shards the page reader does not vouch for. Keys are not kept per record; the few locations a finding needs
are looked up afterwards by position.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import mmap
import os
import re
from bisect import bisect_right
from collections.abc import Generator, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb
import numpy as np

from ..items import DatasetMeta, EncodedImage, LabelBlock, Note, NumericBlock, ReadFailure
from ..location import Location
from ..numbered import COUNT_KEY, PREFIXES, Numbering
from ..records import PICKLE, Decoder, RecordTally
from ..records.detect import short_text
from ..statistics import channel_layout, complex_parts
from .lmdb_pages import (
    BAD_NODE,
    DAMAGE,
    Records,
    check_overflow,
    is_database_record,
    leaf_records,
    read_leaves,
    unsorted_in_pages,
)
from .npy_fields import field_text, leaf_fields, pick

if TYPE_CHECKING:
    from ..records.msgpacked import MsgpackRecord
    from .lmdb import LmdbSource

BLOCK_RECORDS = 1 << 16
"""Records between two tallies (labels, shapes, progress)."""
NO_LABEL = 1 << 40
"""Stands for a record without a label in the label buffer (records with one are int32)."""
LABEL_STREAM = "label"
MAX_KEY = 511
"""LMDB's largest key (``MDB_MAXKEYSIZE``): printable keys up to this are shown whole (convert_imageset's
keys hold the image's path)."""
OUT_OF_ORDER_IN_PAGE = (
    "A read in key order (Caffe's Data layer, a cursor) still gets the record; a lookup by key (txn.get) searches "
    "the page by bisection and finds nothing for it, or for its neighbours"
)

LONG_KEY = 128
"""Keys that are not printable text and longer than this are shown by their first bytes (damaged leaf
pages make up long keys)."""
MARK_EVERY = 4096
"""``_Keys`` remembers a key every this many positions it walks past."""


BOOKKEEPING_KEYS = frozenset(
    {b"__len__", b"__keys__", b"__length__", b"__meta__", b"num-samples", b"num_samples", b"length", b"len", b"keys"}
)
"""Records that LMDB writers keep beside the samples: a count, a pickled list of the keys (ImageNet-LMDB
scripts), clovaai's ``num-samples``."""
BOOKKEEPING_NOTE = "the writer's own record (a count, or the list of keys): no sample, not scanned"
"""The report's ``info`` on each of them."""
LABEL_WORD = rb"(?:labels?|lbl|targets?|cls|class(?:es)?)"
TEXT_RECORD_KEY = re.compile(rb"%s(?:[-_.][0-9]+)?|[0-9]+[-_.]%s" % (LABEL_WORD, LABEL_WORD))
"""Text records beside the image records: the transcriptions of text-recognition datasets (clovaai:
``image-000000001`` and its text under ``label-000000001``), and the labels of writers that keep them apart
from the image bytes (``00000012_label``, ``lbl-12``, one ``labels`` record)."""


def maybe_bookkeeping(key: bytes) -> bool:
    return key in BOOKKEEPING_KEYS or TEXT_RECORD_KEY.fullmatch(key) is not None


def bookkeeping_kind(key: bytes | None, value: bytes | memoryview) -> str | None:
    """What a record that holds no sample is, from its key and its value, or None: a writer's own record under
    one of its names (no image), or a short line of text under ``label-N`` (an empty or binary value there is a
    damaged record like any other)."""
    if key is None:
        return None
    from ..imaging.sniff import sniff

    if sniff(bytes(value[:64])) is not None:
        return None  # an image under any key is a sample
    if key in BOOKKEEPING_KEYS:
        return "bookkeeping"
    if TEXT_RECORD_KEY.fullmatch(key) and short_text(value):
        return "text"
    return None


def key_text(key: bytes | memoryview | None) -> str | None:
    """A key as the report shows it: the text when it is printable UTF-8, else ``0x`` and hex digits."""
    if key is None:
        return None
    raw = bytes(key)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and text.isprintable() and not text.startswith("0x") and len(raw) <= MAX_KEY:
        return text
    if len(raw) > LONG_KEY:
        return f"0x{raw[: LONG_KEY // 2].hex()}… ({len(raw)} bytes)"
    return "0x" + raw.hex()


def unhex(text: str) -> bytes:
    return bytes.fromhex(text)


class _Keys:
    """The key of a record from its position in the shard, walked on demand with a second cursor.

    The hot loops keep no keys. Positions are resolved from the nearest remembered key (``mark``), walking
    forward or backward; keys met on the way every ``MARK_EVERY`` positions are remembered too.
    """

    def __init__(self, txn: Any, first: bytes, start: int) -> None:
        self.cursor = txn.cursor()
        self.positions: list[int] = [start]
        self.keys: list[bytes] = [first]

    def mark(self, pos: int, key: bytes | memoryview | None) -> None:
        if key is None:
            return
        i = bisect_right(self.positions, pos)
        if i and self.positions[i - 1] == pos:
            return
        self.positions.insert(i, pos)
        self.keys.insert(i, bytes(key))

    def key(self, pos: int) -> bytes | None:
        i = bisect_right(self.positions, pos) - 1
        if i < 0:
            return None
        below, key_below = self.positions[i], self.keys[i]
        if below == pos:
            return key_below
        try:
            if i + 1 < len(self.positions) and self.positions[i + 1] - pos < pos - below:
                return self._walk(self.positions[i + 1], self.keys[i + 1], pos - self.positions[i + 1])
            return self._walk(below, key_below, pos - below)
        except lmdb.Error:
            return None

    def _walk(self, at: int, key: bytes, steps: int) -> bytes | None:
        if not self.cursor.set_key(key):
            return None
        if steps < 0:
            keys = self.cursor.iterprev(keys=True, values=False)
        else:
            keys = self.cursor.iternext(keys=True, values=False)
        next(keys)
        step = 1 if steps > 0 else -1
        found: bytes | memoryview | None = key
        for _ in range(abs(steps) // MARK_EVERY):
            found = next(islice(keys, MARK_EVERY - 1, None), None)
            if found is None:
                return None
            at += step * MARK_EVERY
            self.mark(at, found)
        rest = abs(steps) % MARK_EVERY
        if rest:
            found = next(islice(keys, rest - 1, None), None)
        return bytes(found) if found is not None else None


def _next_position(it: Any, default: int) -> int:
    """The position ``enumerate`` would give next (where iteration stopped)."""
    try:
        return int(it.__reduce__()[1][1])
    except (AttributeError, IndexError, TypeError):  # pragma: no cover - other interpreters
        return default


EXPECTED = {
    "datum": "not a Datum protobuf",
    "msgpack": "not a msgpack record",
    "image": "not an image",
    "npy": "not an .npy value",
}
"""What a value is not, by the decoder that expected it (a pickle found among the decoder's records)."""


class _Reader:
    """Reads one shard: the key range, the record loop, and what every decoder's reader shares."""

    reads_pickles = False
    """Whether the reader loads pickles of plain data (then only a pickle it refuses is pickled-records)."""

    def __init__(
        self, source: LmdbSource, env: Any, spec: dict[str, Any], decoder: Decoder, pages: _Pages | None = None
    ) -> None:
        self.source, self.env, self.spec, self.decoder = source, env, spec, decoder
        self.pages = pages
        """Set when the shard is read straight from its leaf pages (no LMDB)."""
        self.txn: Any = env.begin(buffers=True) if env is not None else None
        self.cursor: Any = None
        self.config = source.config
        self.labels: list[int] = []
        """Labels of the records read since the last label block, in key order (NO_LABEL: none)."""
        self.label_start = int(spec["start"])
        self.rel: str = spec["file"]
        self.start: int = int(spec["start"])
        self.count: int = int(spec["count"])
        self.end = self.start + self.count
        self.records: int = int(spec.get("records", self.count))
        self.first = unhex(spec["first"])
        self.cap = self.config.max_locations
        self.keys: Any = _Keys(self.txn, self.first, self.start) if self.txn is not None else None
        self.recent: list[bytes] = []
        """Keys of the records read since the last flush, from ``recent_start`` on, where a loop keeps them
        (``remember``): its items' places are looked up there, not walked to with a cursor."""
        self.recent_start = self.start
        self.shapes: dict[str, int] = {}
        self.samples: dict[str, list[Location]] = {}
        self.sampled: dict[str, int] = {}
        self.tallied = self.start
        """Records before this position are in a tally already."""
        self.accounted = 0
        """Records since the last tally that other items counted (failures, images)."""
        self.nbytes = 0

    # locations ---------------------------------------------------------------------------------

    def location(self, pos: int, key: bytes | memoryview | None = None, detail: str | None = None) -> Location:
        return Location(path=self.rel, key=key_text(self.key_of(pos, key)), index=pos, detail=detail)

    def key_of(self, pos: int, key: bytes | memoryview | None) -> bytes | None:
        """``key`` when the loop had it at hand, else the key of the record at ``pos``, looked up."""
        return bytes(key) if key is not None else self.key_at(pos)

    def key_before(self, pos: int) -> bytes | None:
        """The key of the record before ``pos`` (the previous shard's last one for the first), when known."""
        if pos <= self.start:
            return unhex(self.spec.get("prev") or "") or None
        try:
            return self.key_at(pos - 1)
        except (lmdb.Error, IndexError):
            return None

    def key_at(self, pos: int) -> bytes | None:
        """The key of the record at ``pos`` of this shard, looked up afterwards."""
        if self.pages is not None:
            return self.pages.key(pos - self.start)
        i = pos - self.recent_start
        if 0 <= i < len(self.recent):
            return self.recent[i]
        return self.keys.key(pos)  # type: ignore[no-any-return]

    def remember(self, pos: int, key: bytes) -> None:
        """Keep the key of the record at ``pos``, the one after the last kept (until the next flush)."""
        if pos != self.recent_start + len(self.recent):  # not the next one (never, reading in order): start over
            self.recent.clear()
            self.recent_start = pos
        self.recent.append(key)

    def mark(self, pos: int) -> None:
        """Remember the key of the record the loop is at (cheap lookups near it later)."""
        if self.keys is not None:
            self.keys.mark(pos, self.key(pos))

    def locator(self, positions: list[int] | range) -> Any:
        def at(i: int) -> Location:
            return self.location(positions[i])

        return at

    def failure(
        self, code: str, pos: int, key: bytes | memoryview | None, detail: str, value: bytes | memoryview | None = None
    ) -> ReadFailure:
        self.accounted += 1
        raw = self.key_of(pos, key)
        if raw == b"":  # LMDB refuses empty keys: this node was cut short or overwritten, not written so
            before = self.key_before(pos)
            after = f" after key {key_text(before)}" if before else ""
            code = "R004"
            detail = (
                f"damaged record node{after}: its key is empty, which LMDB never stores (a leaf page "
                f"cut short or overwritten); its value reads as: {detail}"
            )
            where = Location(path=self.rel, index=pos, detail=detail)
        else:
            where = self.location(pos, raw, detail)
        return ReadFailure(code, where, items=1, nbytes=len(value) if value else 0)

    def bad_value(
        self, pos: int, key: bytes | memoryview | None, value: bytes | memoryview, why: str, refused: bool = False
    ) -> ReadFailure | Note:
        """A value the decoder refuses: pickled-records when it is a pickle the pickle decoder refused to load
        (``refused``: one that needs a global, which the reason ``why`` names), a note when it is the record of a
        named database (``env.open_db(name)`` keeps one in the main database, beside the records), else
        record-invalid: also a pickle among the records of another decoder (a Datum database), which the
        database's own reader (Caffe's Data layer, a Datum or msgpack loader) fails on, a crash, not a record
        merely left unchecked."""
        from ..records.pickles import describe, pickle_protocol

        own = self.bookkeeping(pos, key, value)
        if own is not None:
            return own
        if is_database_record(value):
            self.accounted += 1
            name = key_text(self.key_of(pos, key))
            detail = "a named database: its records are not scanned (dscan reads the main database)"
            return Note(info={f"lmdb.named_database {name}": detail}, items=1, nbytes=len(value))

        protocol = pickle_protocol(value)
        if protocol is not None and refused:
            detail = f"a pickled Python object ({describe(protocol)}) that {why}: not unpickled, not scanned"
            return self.failure("R005", pos, key, detail, value)
        if protocol is not None and not self.reads_pickles:
            expected = EXPECTED.get(self.decoder.name, f"not a {self.decoder} value")
            why = f"{expected}: a pickled Python object ({describe(protocol)}), which the database's reader cannot read"
        return self.failure("R001", pos, key, f"{why} ({len(value)} bytes)", value)

    def bookkeeping(self, pos: int, key: bytes | memoryview | None, value: bytes | memoryview) -> Note | None:
        """A note for a record a writer keeps beside the samples (``__len__``, ``__keys__``, clovaai's
        ``num-samples`` and ``label-N`` texts), None for any other record."""
        raw = self.key_of(pos, key)
        kind = bookkeeping_kind(raw, value)
        if kind is None:
            return None
        self.accounted += 1
        if kind == "text":
            detail = "records named label-N, N_label or labels (text next to the image records: their labels)"
            return Note(info={"lmdb.text_records": f"{detail}: not images, not scanned"}, items=1, nbytes=len(value))
        return Note(info={f"lmdb.bookkeeping {key_text(raw)}": BOOKKEEPING_NOTE}, items=1, nbytes=len(value))

    def _label_blocks(self) -> Iterator[Any]:
        if not self.labels:
            return
        values = np.array(self.labels, np.int64)
        start = self.label_start
        self.labels.clear()
        self.label_start = start + values.size
        present = values != NO_LABEL
        if present.all():
            runs = [(0, values.size)]
        else:
            edges = np.flatnonzero(np.diff(np.concatenate(([False], present, [False])).astype(np.int8)))
            runs = list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
        for a, b in runs:
            yield LabelBlock(
                stream=LABEL_STREAM,
                labels=values[a:b],
                global_start=start + a,
                locate=self.locator(range(start + a, start + b)),
                nbytes=0,  # part of the records' values, counted as they are read
            )

    def uncount_shape(self, shape: str, pos: int) -> None:
        """Take back a record counted under ``shape`` (found not to be a record of it after all)."""
        self.shapes[shape] = self.shapes.get(shape, 0) - 1
        kept = self.samples.get(shape, [])
        self.samples[shape] = [loc for loc in kept if loc.index != pos]

    def count_shape(self, shape: str, pos: int, key: bytes | memoryview | None, n: int = 1) -> None:
        self.shapes[shape] = self.shapes.get(shape, 0) + n
        if self.sampled.get(shape, 0) < self.cap:
            self.sampled[shape] = self.sampled.get(shape, 0) + 1
            self.samples.setdefault(shape, []).append(self.location(pos, key))

    # the loop ------------------------------------------------------------------------------------

    def run(self) -> Iterator[Any]:
        try:
            values = self._values()
        except lmdb.Error as exc:
            yield from self._stopped(self.start, exc)
            return
        if values is None:
            last = key_text(unhex(self.spec["last"]))
            detail = (
                f"the cursor cannot be placed at this key, the first of {self.count:,} records found when planning "
                f"(up to key {last}): the B-tree path to it is damaged; those records were not read"
            )
            yield ReadFailure("R004", self.location(self.start, self.first, detail), items=self.count)
            return
        it = enumerate(values, self.start)
        try:
            yield from self.loop(it)
        except lmdb.Error as exc:
            stop = _next_position(it, self.start)
            yield from self.flush(stop)
            yield from self._stopped(stop, exc)
            return
        yield from self.flush(self.end)

    def key(self, pos: int) -> bytes | None:
        """The key of the record at ``pos``, while the reading loop is at it."""
        if self.cursor is not None:
            return bytes(self.cursor.key())
        return self.key_at(pos)

    def _values(self) -> Iterator[Any] | None:
        """The shard's values: from its first key on, or else read backward from a key after it.

        Keys in a damaged leaf page can be walked to but not looked up (the search inside the page goes astray),
        and a damaged branch page hides whole subtrees from lookups that sibling steps still reach: the range
        is then read backward from the next range's first key, or from the last key of the database.
        """
        for attempt in (self._from_first, self._from_next, self._from_end):
            try:
                found = attempt(self.txn.cursor())
            except lmdb.Error:
                found = None
                # LMDB refuses every later call in a transaction that met a damaged page: start a fresh one
                self.txn.abort()
                self.txn = self.env.begin(buffers=True)
                self.keys = _Keys(self.txn, self.first, self.start)
            if found is not None:
                return found
        return None

    def _from_first(self, cursor: Any) -> Iterator[Any] | None:
        if not cursor.set_key(self.first):
            return None
        self.cursor = cursor  # the loop's keys come from it (values only are iterated)
        return islice(cursor.iternext(keys=False, values=True), self.count)

    def _from_next(self, cursor: Any) -> Iterator[Any] | None:
        after = self.spec.get("next")
        if after is None or not cursor.set_key(unhex(after)) or not cursor.prev():
            return None
        return self._backward(cursor)

    def _from_end(self, cursor: Any) -> Iterator[Any] | None:
        last = unhex(self.spec["last"])
        if not cursor.last():
            return None
        for key in cursor.iterprev(keys=True, values=False):
            if bytes(key) <= last:
                break
        if cursor.key() != last:
            return None
        return self._backward(cursor)

    def _backward(self, cursor: Any) -> Iterator[Any] | None:
        """``count`` values read backward from the cursor (placed at the range's last key), in key order."""
        pairs = list(islice(cursor.iterprev(keys=True, values=True), self.count))
        if len(pairs) != self.count or bytes(pairs[-1][0]) != self.first:
            return None
        pairs.reverse()
        for pos, (key, _value) in enumerate(pairs, self.start):
            self.keys.mark(pos, key)
        return iter([value for _key, value in pairs])

    def _stopped(self, stop: int, exc: lmdb.Error) -> Iterator[Any]:
        lost = self.end - stop
        last = key_text(unhex(self.spec["last"]))
        reason = f"{type(exc).__name__}: {exc}"
        if stop > self.start:
            where = self.location(
                stop - 1,
                None,
                f"reading stopped after this key: {reason}; {lost:,} records of "
                f"this range, up to key {last}, were not read",
            )
        else:
            where = Location(
                path=self.rel,
                key=key_text(self.first),
                index=self.start,
                detail=f"reading stopped at this key: {reason}; {lost:,} records up to key {last} were not read",
            )
        yield ReadFailure("R004", where, items=lost)

    def loop(self, it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
        raise NotImplementedError

    def flush(self, end: int) -> Iterator[Any]:
        """Everything gathered up to position ``end`` (exclusive), as items."""
        yield from self.blocks(end)
        yield RecordTally(
            path=self.rel,
            shapes=self.shapes,
            samples=self.samples,
            items=max(0, end - self.tallied - self.accounted),
            nbytes=self.nbytes,
        )
        self.shapes, self.samples = {}, {}
        self.tallied, self.accounted, self.nbytes = end, 0, 0
        del self.recent[: max(0, end - self.recent_start)]  # the items of those records are out
        self.recent_start = max(self.recent_start, end)

    def blocks(self, end: int) -> Iterator[Any]:
        return iter(())


class _Batch:
    """Rows of one numeric shape, copied from record values into a reused buffer."""

    def __init__(self, reader: _Reader, name: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.reader = reader
        self.dtype, self.shape = dtype, shape
        self.row_bytes = max(1, math.prod(shape) * dtype.itemsize)
        self.rows = max(1, reader.config.block_bytes // self.row_bytes)
        self.buf = bytearray()
        """Grown on first use (a batch may only lend its meta to another buffer)."""
        self.positions: list[int] = []
        shape_text = "x".join(map(str, shape)) or "scalar"
        full = (reader.records, *shape)
        axis, channels = channel_layout(full)
        self.meta = DatasetMeta(
            stats_key=f"{reader.rel}::{name}[{shape_text}]",
            path=reader.rel,
            dataset=name,
            dtype=str(dtype),
            shape=full,
            channel_axis=axis,
            channels=channels,
            rows_from_blocks=True,
        )

    @property
    def full(self) -> bool:
        return len(self.positions) >= self.rows

    def add(self, pos: int, data: bytes | memoryview) -> None:
        if not self.buf:
            # one buffer per dtype too: float32 and float64 rows of one shape may fill at the same time
            self.buf = _buffer(f"{self.meta.stats_key}:{self.dtype.str}", self.rows * self.row_bytes)
        at = len(self.positions) * self.row_bytes
        self.buf[at : at + self.row_bytes] = data
        self.positions.append(pos)

    def block(self) -> NumericBlock | None:
        n = len(self.positions)
        if not n:
            return None
        data = np.frombuffer(self.buf, self.dtype, count=n * self.row_bytes // self.dtype.itemsize)
        positions, self.positions = self.positions, []
        return NumericBlock(
            meta=self.meta,
            data=data.reshape(n, *self.shape),
            offset=(0,) * (len(self.shape) + 1),
            locate=self.reader.locator(positions),
            nbytes=0,  # the values' bytes are counted as they are read (RecordTally)
        )


class _DatumReader(_Reader):
    """Caffe Datums: labels in key order, pixel sizes, float_data values, encoded images."""

    def __init__(
        self, source: LmdbSource, env: Any, spec: dict[str, Any], decoder: Decoder, pages: _Pages | None = None
    ) -> None:
        super().__init__(source, env, spec, decoder, pages)
        from ..records import datum

        self.datum = datum
        self.layout: Any = None
        self.segment_layout: Any = None
        self.segment_start = self.start
        self.segment_slow: list[int] = []
        self.candidate: tuple[Any, int] = (None, 0)
        self.float_rows: _FloatRows | None = None
        self.slow_floats: dict[tuple[int, int, int], _Batch] = {}

    def loop(self, it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
        while True:
            layout = self.layout
            if layout is None:
                done = yield from self._slow_loop(it)
            elif layout.kind == self.datum.RAW:
                done = yield from self._raw_loop(it, layout)
            else:
                done = yield from self._float_loop(it, layout)
            if done:
                return

    def _slow_loop(self, it: Iterator[tuple[int, Any]]) -> Generator[Any, None, bool]:
        for pos, value in it:
            yield from self._slow(pos, self.key(pos), value)
            if self.layout is not None:
                return False
        return True

    def _raw_loop(self, it: Iterator[tuple[int, Any]], layout: Any) -> Generator[Any, None, bool]:
        head = layout.head
        cut = len(head)
        end = cut + layout.size
        tails = layout.tails.get
        labels = self.labels
        add = labels.append
        mid, last = cut + layout.size // 2, end - 1
        for pos, value in it:
            if value[:cut] == head:
                label = tails(value[end:])
                if label is not None:
                    add(label)
                    if value[cut] == value[mid] == value[last]:  # rarely: then compared in full
                        blank = self._blank(pos, None, value[cut:end], layout.shape)
                        if blank is not None:
                            yield blank
                    if len(labels) >= BLOCK_RECORDS:
                        self.mark(pos)
                        yield from self.flush(pos + 1)
                    continue
            yield from self._slow(pos, self.key(pos), value)
            if self.layout is not layout:
                return False
        return True

    def _float_loop(self, it: Iterator[tuple[int, Any]], layout: Any) -> Generator[Any, None, bool]:
        rows = self._rows(layout)
        starts = layout.starts.get
        width = layout.key_len
        size = layout.size
        tail = layout.tail
        tail_len = len(tail)
        buf = rows.buf
        capacity = rows.capacity
        put = rows.positions.append
        add = self.labels.append
        at = rows.fill
        try:
            for pos, value in it:
                got = starts(value[:width])
                if got is not None:
                    label, start = got
                    stop = start + size
                    if len(value) == stop + tail_len and (not tail_len or value[stop:] == tail):
                        buf[at : at + size] = value[start:stop]
                        at += size
                        put(pos)
                        add(label)
                        if at >= capacity:
                            rows.fill = at
                            self.mark(pos)
                            yield from self.flush(pos + 1)
                            at = rows.fill
                        continue
                rows.fill = at
                yield from self._slow(pos, self.key(pos), value)
                at = rows.fill
                if self.layout is not layout:
                    return False
            return True
        finally:
            rows.fill = at

    def _rows(self, layout: Any) -> _FloatRows:
        if self.float_rows is None or self.float_rows.layout is not layout:
            if self.float_rows is not None and self.float_rows.fill:
                raise RuntimeError("float rows of another layout still pending")  # flushed before a switch
            self.float_rows = _FloatRows(self, layout, direct=self.pages is not None)
        return self.float_rows

    # straight from the pages ---------------------------------------------------------------------

    def run_direct(self) -> Iterator[Any]:
        """The shard's records located in its leaf pages and judged a block at a time with numpy.

        Records of the current layout are recognised by vectorised byte comparisons over the mapped file;
        the others (and the first ones, to learn a layout) go through the full parse one by one.
        """
        pages = self.pages
        assert pages is not None
        at, length, damaged = pages.records.value_at, pages.records.value_len, pages.records.damaged
        yield from keys_out_of_order(pages, self.rel, self.start)
        pages.map()
        i, end = 0, len(pages.records)
        while i < end:
            layout = self.layout
            if layout is None:
                yield from self._one(i)
                i += 1
                continue
            j = min(end, i + max(1, BLOCK_RECORDS - len(self.labels)))
            match = _match_raw if layout.kind == self.datum.RAW else _match_floats
            ok, labels, starts = match(pages.view, at[i:j], length[i:j], layout)
            ok &= damaged[i:j] == 0
            done = i
            for stop in [*(np.flatnonzero(~ok) + i).tolist(), j]:
                if stop > done:
                    yield from self._take(layout, done, stop, labels[done - i : stop - i], starts[done - i : stop - i])
                if stop == j:
                    done = j
                    break
                yield from self._one(stop)
                done = stop + 1
                if self.layout is not layout:
                    break
            i = done
            if len(self.labels) >= BLOCK_RECORDS:
                yield from self.flush(self.start + i)
        yield from self.flush(self.end)

    def _one(self, offset: int) -> Iterator[Any]:
        """One record of the shard read from the pages, parsed in full (or reported when its page is bad)."""
        pages = self.pages
        assert pages is not None
        pos = self.start + offset
        damage = int(pages.records.damaged[offset])
        if damage:
            self.segment_slow.append(pos)
            self.labels.append(NO_LABEL)
            detail = f"this record cannot be read: {DAMAGE[damage]}"
            key = self.key_at(pos)
            if key is None:
                before = self.key_before(pos)
                detail += f"; it follows key {key_text(before)}" if before else ""
            yield self.failure("R004", pos, key, detail)
            yield from self._maybe_flush(pos, None)
            return
        yield from self._slow(pos, self.key_at(pos), pages.value(offset))

    def _take(
        self, layout: Any, a: int, b: int, labels: np.ndarray[Any, Any], starts: np.ndarray[Any, Any]
    ) -> Iterator[Any]:
        """Records a..b (shard offsets) that match ``layout``: their labels, and for floats their payload."""
        pages = self.pages
        assert pages is not None
        if layout.kind == self.datum.RAW:
            self.labels.extend(labels.tolist())
            pixels = pages.records.value_at[a:b] + len(layout.head)  # where each record's pixels start
            view, size = pages.view, layout.size
            probe = view[pixels]
            maybe = (probe == view[pixels + size // 2]) & (probe == view[pixels + size - 1])
            for k in np.flatnonzero(maybe).tolist():
                blank = self._blank(self.start + a + k, None, view[pixels[k] : pixels[k] + size], layout.shape)
                if blank is not None:
                    yield blank
            return
        rows = self._rows(layout)
        size, count, tag = layout.size, layout.count, self.datum.TAG_FLOAT
        offsets = pages.records.value_at[a:b] + starts
        k = 0
        while k < b - a:
            row = rows.fill // size
            take = min(b - a - k, rows.rows - row)
            chunk = offsets[k : k + take]
            steps = np.diff(chunk)
            even = take if not steps.size or (steps == steps[0]).all() else int(np.argmax(steps != steps[0])) + 1
            stride, at = (int(steps[0]) if steps.size else size), int(chunk[0])
            # records evenly spaced in the window: their tag bytes and their floats as strided views of it
            tags = np.ndarray((even, count), np.uint8, buffer=pages.view, offset=at, strides=(stride, 5))
            floats = np.ndarray((even, count), "<f4", buffer=pages.view, offset=at + 1, strides=(stride, 5))
            first = self.start + a + k
            run_labels = labels[k : k + even]
            good = (tags == tag).all(axis=1) if not (tags == tag).all() else None
            if good is None:
                np.copyto(rows.out[row * count : (row + even) * count].reshape(even, count), floats)
                rows.positions.extend(range(first, first + even))
                self.labels.extend(run_labels.tolist())
                rows.fill += even * size
            else:
                kept = int(good.sum())
                np.copyto(rows.out[row * count : (row + kept) * count].reshape(kept, count), floats[good])
                rows.positions.extend((first + np.flatnonzero(good)).tolist())
                self.labels.extend(np.where(good, run_labels, NO_LABEL).tolist())
                rows.fill += kept * size
                for r in np.flatnonzero(~good).tolist():
                    payload = np.lib.stride_tricks.as_strided(
                        pages.view[at + r * stride :], shape=(size,), strides=(1,), writeable=False
                    ).tobytes()
                    yield rows.reject(first + r, int(run_labels[r]), payload)
            k += even
            if rows.fill >= rows.capacity:
                yield from self.flush(self.start + a + k)

    # the full parse ------------------------------------------------------------------------------

    def _slow(self, pos: int, key: Any, value: Any) -> Iterator[Any]:
        datum = self.datum
        self.segment_slow.append(pos)
        try:
            d = datum.parse(value)
        except datum.DatumError as exc:
            self.labels.append(NO_LABEL)
            yield self.bad_value(pos, key, value, str(exc))  # its bytes count with the finding
            yield from self._maybe_flush(pos, key)
            return
        label = d.label if d.label is not None else 0  # Caffe reads a Datum without a label as label 0
        self.labels.append(label)
        if d.encoded:
            self.accounted += 1
            yield EncodedImage(data=d.data, location=self.location(pos, key), label=label, nbytes=len(value))
            yield from self._maybe_flush(pos, key)
            return
        self.nbytes += len(value)
        if d.data and len(d.data) != d.expected:
            c, h, w = d.shape
            detail = f"data has {len(d.data):,} bytes, but channels×height×width = {c}×{h}×{w} = {d.expected:,}"
            yield self.failure("R002", pos, key, detail)
        elif not d.data and d.floats != d.expected:
            c, h, w = d.shape
            detail = f"float_data has {d.floats:,} values, but channels×height×width = {c}×{h}×{w} = {d.expected:,}"
            yield self.failure("R002", pos, key, detail)
        else:  # only a well-formed record's shape counts towards the majority shape (record-shape-mismatch)
            self.count_shape("x".join(map(str, d.shape)), pos, key)
            if d.data:
                blank = self._blank(pos, key, d.data, d.shape)
                if blank is not None:
                    yield blank
            if not d.data:
                batch = self.slow_floats.get(d.shape)
                if batch is None:
                    batch = self.slow_floats[d.shape] = _Batch(self, "float_data", np.dtype(np.float32), d.shape)
                batch.add(pos, np.asarray(d.message.float_data, np.float32).tobytes())
                if batch.full:
                    yield from self.flush(pos + 1)
            yield from self._learn(pos, value, d)
        yield from self._maybe_flush(pos, key)

    def _blank(self, pos: int, key: Any, pixels: Any, shape: tuple[int, ...]) -> ReadFailure | None:
        """constant-sample when every pixel of a raw Datum is the same (what the float path's checks find in
        float_data): a blank image that per-image normalisation divides by 0."""
        if sum(n > 1 for n in shape) < 2:  # a K×1×1 Datum is a vector (labels, features), not an image
            return None
        data = np.frombuffer(pixels, np.uint8) if not isinstance(pixels, np.ndarray) else pixels
        if not data.size or not bool((data == data[0]).all()):
            return None
        detail = f"every value is {int(data[0])} ({'×'.join(map(str, shape))})"
        return ReadFailure("V005", self.location(pos, key, detail), items=0, values=int(data.size))

    def drop_label(self, pos: int) -> int:
        """The label buffered for ``pos`` (not flushed yet), replaced by NO_LABEL."""
        i = pos - self.label_start
        label, self.labels[i] = self.labels[i], NO_LABEL
        return label

    def _maybe_flush(self, pos: int, key: Any) -> Iterator[Any]:
        if len(self.labels) >= BLOCK_RECORDS:
            self.mark(pos)
            yield from self.flush(pos + 1)

    def _learn(self, pos: int, value: Any, d: Any) -> Iterator[Any]:
        """Adopt the layout of well-formed records (switching when another one keeps coming)."""
        layout = self.layout
        if layout is not None and layout.shape == d.shape and layout.learn(value):
            self.candidate = (None, 0)
            return
        if layout is not None and (d.label is None or d.label >= self.datum.MAX_LABELS):
            return
        new = self.datum.layout_of(value, d)
        if new is None:
            return
        if layout is not None:
            seen, n = self.candidate
            same = seen is not None and seen.kind == new.kind and seen.shape == new.shape
            self.candidate = (seen if same else new, n + 1 if same else 1)
            if self.candidate[1] < SWITCH_AFTER:
                return
            new = self.candidate[0]
            new.learn(value)
            yield from self.flush(pos + 1)
        self.candidate = (None, 0)
        self._close_segment(pos + 1)
        self.layout = self.segment_layout = new

    def _close_segment(self, end: int) -> None:
        """Count the records the current layout recognised in [segment start, end), with sample locations."""
        layout = self.segment_layout
        slow = self.segment_slow
        if layout is not None:
            hits = (end - self.segment_start) - len(slow)
            if hits > 0:
                shape = layout.shape_text
                self.shapes[shape] = self.shapes.get(shape, 0) + hits
                want = self.cap - self.sampled.get(shape, 0)
                if want > 0:
                    skip = set(slow)
                    found = [
                        p for p in itertools.islice(range(self.segment_start, end), want + len(slow)) if p not in skip
                    ][:want]
                    self.sampled[shape] = self.sampled.get(shape, 0) + len(found)
                    self.samples.setdefault(shape, []).extend(self.location(p) for p in found)
                size = len(layout.head) + layout.size + 2
                self.nbytes += hits * size
        self.segment_start = end
        self.segment_slow = []
        self.segment_layout = self.layout

    # flushing ------------------------------------------------------------------------------------

    def blocks(self, end: int) -> Iterator[Any]:
        self._close_segment(end)
        if self.float_rows is not None and self.float_rows.fill:
            yield from self.float_rows.blocks()
        for batch in self.slow_floats.values():
            block = batch.block()
            if block is not None:
                yield block
        yield from self._label_blocks()


SWITCH_AFTER = 16
"""Records in a row of another recognisable layout before the fast path switches to it."""

FLOAT_ITEM = np.dtype([("tag", "u1"), ("value", "<f4")])


_BUFFERS: dict[tuple[str, int], bytearray] = {}
"""Buffers reused by every shard a worker process reads (fresh memory costs a page fault per page)."""


def _buffer(name: str, size: int) -> bytearray:
    """A process-wide reusable buffer of ``size`` bytes (items never outlive their shard's reading).

    Only buffers up to ``KEEP_BUFFER`` bytes are kept: a huge record's buffer is its own.
    """
    if size > KEEP_BUFFER:
        return bytearray(size)
    key = (name, size)
    found = _BUFFERS.get(key)
    if found is None:
        if len(_BUFFERS) >= 8:
            _BUFFERS.clear()
        found = _BUFFERS[key] = bytearray(size)
    return found


KEEP_BUFFER = 16 << 20


class _FloatRows:
    """float_data payloads of one layout, copied as they are on the wire (tag byte + float) into a buffer."""

    def __init__(self, reader: _DatumReader, layout: Any, direct: bool = False) -> None:
        self.reader, self.layout = reader, layout
        self.direct = direct
        """Rows go straight into ``out`` as floats (reading from the pages) instead of through ``buf``."""
        self.rows = max(1, reader.config.block_bytes // layout.size)
        self.capacity = self.rows * layout.size
        self.buf = _buffer("float rows", self.capacity)
        self.grid = np.frombuffer(self.buf, np.uint8).reshape(self.rows, layout.size)
        """The same buffer as one row per record (for strided copies of records laid out evenly in the file)."""
        self.out = np.frombuffer(_buffer("floats", self.rows * layout.count * 4), np.float32)
        self.fill = 0
        self.positions: list[int] = []
        self.batch = _Batch(reader, "float_data", np.dtype(np.float32), layout.shape)

    def blocks(self) -> Iterator[Any]:
        layout = self.layout
        n = self.fill // layout.size
        items = np.frombuffer(self.buf, FLOAT_ITEM, count=n * layout.count).reshape(n, layout.count)
        positions = self.positions[:]
        self.positions.clear()  # in place: the reading loop appends to this very list
        self.fill = 0
        if self.direct:  # converted (and checked) as they were taken from the file
            data = self.out[: n * layout.count].reshape(n, layout.count)
            yield NumericBlock(
                meta=self.batch.meta,
                data=data.reshape(n, *layout.shape),
                offset=(0, 0, 0, 0),
                locate=self.reader.locator(positions),
                nbytes=0,  # the values' bytes are counted as they are read (RecordTally)
            )
            return
        tags = self.grid[:n, ::5] == self.reader.datum.TAG_FLOAT  # every item's tag byte: one strided pass
        if not tags.all():
            good = tags.all(axis=1)
            yield from self._recheck(items, positions, np.flatnonzero(~good))
            positions = [p for p, ok in zip(positions, good.tolist(), strict=True) if ok]
            items = items[good]
        if not positions:
            return
        data = self.out[: len(positions) * layout.count].reshape(len(positions), layout.count)
        np.copyto(data, items["value"])
        yield NumericBlock(
            meta=self.batch.meta,
            data=data.reshape(len(positions), *layout.shape),
            offset=(0, 0, 0, 0),
            locate=self.reader.locator(positions),
            nbytes=0,  # the values' bytes are counted as they are read (RecordTally)
        )

    def _recheck(self, items: np.ndarray[Any, Any], positions: list[int], rows: np.ndarray[Any, Any]) -> Iterator[Any]:
        """Rows whose payload was not all float items: not this layout after all. Parse them in full."""
        for row in rows.tolist():
            pos = positions[row]
            yield self.reject(pos, self.reader.drop_label(pos), items[row].tobytes())

    def reject(self, pos: int, label: int, payload: bytes) -> ReadFailure:
        """The finding for a record that looked like this layout but whose payload holds more than floats."""
        reader, layout = self.reader, self.layout
        value = layout.head + bytes([5 << 3]) + _varint(label) + payload + layout.tail
        reader.uncount_shape(layout.shape_text, pos)  # it was counted as a well-formed record of the layout's shape
        try:
            d = reader.datum.parse(value)
        except reader.datum.DatumError as exc:
            return reader.failure("R001", pos, None, f"{exc} ({len(value)} bytes)")
        reader.labels[pos - reader.label_start] = label  # a Datum after all: its label counts, as on the full parse
        c, h, w = d.shape
        detail = f"float_data has {d.floats:,} values, but channels×height×width = {c}×{h}×{w} = {d.expected:,}"
        return reader.failure("R002", pos, None, detail)


def _varint(value: int) -> bytes:
    from ..records.wire import varint

    return varint(value)


class _NumericReader(_Reader):
    """npy blobs and raw numbers: batched by dtype and shape into numeric blocks."""

    def __init__(self, source: LmdbSource, env: Any, spec: dict[str, Any], decoder: Decoder) -> None:
        super().__init__(source, env, spec, decoder)
        self.batches: dict[tuple[str, tuple[int, ...], str | None], _Batch] = {}

    def batch(self, dtype: np.dtype[Any], shape: tuple[int, ...], field: str | None = None) -> _Batch:
        """The batch of one dtype and shape (of one column of structured values, ``field`` its path as
        locations name it: ``['x']`` for ``npy['x']``)."""
        key = (dtype.str, shape, field)
        found = self.batches.get(key)
        if found is None:
            name = self.decoder.name if field is None else f"{self.decoder.name}{field}"
            found = self.batches[key] = _Batch(self, name, dtype, shape)
        return found

    def blocks(self, end: int) -> Iterator[Any]:
        for batch in self.batches.values():
            block = batch.block()
            if block is not None:
                yield block

    def loop(self, it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
        if self.decoder.raw is not None:
            yield from self._raw(it)
        else:
            yield from self._npy(it)

    def _raw(self, it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
        spec = self.decoder.raw
        assert spec is not None
        size = spec.nbytes
        batch = self.batch(spec.dtype, spec.shape)
        since = self.start
        for pos, value in it:
            if len(value) == size:
                self.nbytes += size
                batch.add(pos, value)
                if batch.full:
                    self.mark(pos)
                    yield from self.flush(pos + 1)
                    since = pos + 1
                continue
            key = self.key(pos)
            from ..records.pickles import pickle_protocol

            own = self.bookkeeping(pos, key, value)  # the writer's __len__ or __keys__ beside the samples
            if own is not None:
                yield own
            elif pickle_protocol(value) is not None:
                yield self.bad_value(pos, key, value, "a pickle")
            else:
                detail = f"the value has {len(value):,} bytes, but {spec} needs {size:,}"
                yield self.failure("R002", pos, key, detail, value)
            if pos + 1 - since >= BLOCK_RECORDS:
                yield from self.flush(pos + 1)
                since = pos + 1

    def _fields(self, pos: int, array: np.ndarray[Any, Any]) -> Iterator[Any]:
        """Structured values (a record array): each numeric field, a column of its own (as HDF5 compound
        columns are), the fields of a nested table by their path (``npy['pos']['y']``: a whole nested table was
        passed over as holding no numbers); fields of other kinds are named as not scanned."""
        leaves = list(leaf_fields(array.dtype))
        skipped = [path[0] if len(path) == 1 else field_text(path) for path, leaf in leaves if not _numeric(leaf)]
        if skipped:
            yield Note(
                info={
                    "lmdb.not_scanned": f"fields of structured .npy values that hold no numbers: {', '.join(skipped)}"
                }
            )
        for path, leaf in leaves:
            if _numeric(leaf):
                column = np.ascontiguousarray(pick(array, path))
                batch = self.batch(*_as_real(column.dtype, column.shape), field=field_text(path))
                batch.add(pos, column.tobytes())

    def _npy(self, it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
        from ..records import npy

        since = self.start
        for pos, value in it:
            key = self.key(pos)
            try:
                header = npy.read_header(value)
            except npy.NpyPickled as exc:
                yield self.failure("R005", pos, key, f"an .npy {exc}: not unpickled, not scanned", value)
                continue
            except npy.NpyError as exc:
                yield self.bad_value(pos, key, value, f"not an .npy value: {exc}")
                continue
            self.nbytes += len(value)  # (a value reported above counts with its finding)
            have = len(value) - header.offset
            if have != header.nbytes:
                detail = (
                    f"the .npy data has {have:,} bytes, but its header declares {header.dtype} "
                    f"{header.shape_text} = {header.nbytes:,}"
                )
                yield self.failure("R002", pos, key, detail)
                continue
            self.count_shape(header.shape_text, pos, key)  # a well-formed record's shape (record-shape-mismatch)
            if header.dtype.kind in "biufc" and header.nbytes:
                batch = self.batch(*_as_real(header.dtype, header.shape))
                if header.fortran:
                    batch.add(pos, np.ascontiguousarray(npy.as_array(value, header)).tobytes())
                else:
                    batch.add(pos, value[header.offset :])
                if batch.full:
                    self.mark(pos)
                    yield from self.flush(pos + 1)
                    since = pos + 1
                    continue
            elif header.dtype.fields and header.nbytes:
                yield from self._fields(pos, npy.as_array(value, header))
                if any(b.full for b in self.batches.values()):
                    self.mark(pos)
                    yield from self.flush(pos + 1)
                    since = pos + 1
                    continue
            if pos + 1 - since >= BLOCK_RECORDS:
                self.mark(pos)
                yield from self.flush(pos + 1)
                since = pos + 1


def _numeric(dtype: np.dtype[Any]) -> bool:
    """Whether a field's values are numbers (a field may hold a sub-array)."""
    return dtype.base.kind in "biufc"


def _as_real(dtype: np.dtype[Any], shape: tuple[int, ...]) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """The dtype and shape numeric blocks read a value as: complex numbers as their parts, a last axis of 2."""
    return (complex_parts(dtype), (*shape, 2)) if dtype.kind == "c" else (dtype, shape)


class _ImageReader(_Reader):
    """Encoded images: one EncodedImage item per record, judged by the image checks. The numbered keys of a
    text-recognition database (``image-N``, ``label-N``, ``num-samples``) are gathered as runs, for the pairing
    judged after the merge (``numbered.py``)."""

    def __init__(
        self, source: LmdbSource, env: Any, spec: dict[str, Any], decoder: Decoder, pages: _Pages | None = None
    ) -> None:
        super().__init__(source, env, spec, decoder, pages)
        self.numbering = Numbering(self.rel)

    def loop(self, it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
        from ..records.pickles import pickle_protocol

        numbering = self.numbering
        for pos, value in it:
            key = self.key(pos)
            if key is not None:
                if key[:6] in PREFIXES:
                    numbering.add(key, pos)
                elif key == COUNT_KEY:
                    numbering.add_count(value, pos)
            if len(value) > 2 and value[0] == 0x80 and pickle_protocol(value) is not None:
                yield self.bad_value(pos, key, value, "a pickle")
                continue
            if key is not None and maybe_bookkeeping(key):  # a set lookup per record; the value is checked after
                own = self.bookkeeping(pos, key, value)
                if own is not None:
                    yield own
                    continue
            self.accounted += 1
            yield EncodedImage(data=bytes(value), location=self.location(pos, key), nbytes=len(value))

    def blocks(self, end: int) -> Iterator[Any]:
        if self.numbering:
            yield self.numbering.take()


def keys_out_of_order(pages: _Pages, rel: str, start: int) -> Iterator[ReadFailure]:
    """lmdb-corrupt for each key of the shard's leaf pages (the shard's first record at ``start``) that does not
    sort after the key before it in its page; the record itself is read on as any other."""
    for offset in unsorted_in_pages(np.frombuffer(pages.keys, np.uint8), pages.records, pages.psize).tolist():
        detail = (
            f"keys out of order: this key sorts at or before the key before it in its leaf page "
            f"({key_text(pages.key(offset - 1))}): a damaged key. {OUT_OF_ORDER_IN_PAGE}"
        )
        where = Location(path=rel, key=key_text(pages.key(offset)), index=start + offset, detail=detail)
        yield ReadFailure("R004", where, items=0)


class _Pages:
    """The records of one shard's leaf pages, and a read-only mapping of the file holding their values.

    The mapping copies nothing: a value's pages are mapped from the page cache when the checks first touch
    them, and count as page cache, not as the process's own memory. Measured on a 4.4 GB environment of 1M
    Datums, reading the same values with ``pread`` into a reused buffer spent more time copying than the
    checks took. A file that shrinks under the mapping kills the reader with SIGBUS: the pool retries, then
    isolates the record (``lmdb-corrupt``), as for any reader that dies.
    """

    def __init__(self, fd: int, size: int, psize: int, leaves: np.ndarray[Any, Any], records: Records) -> None:
        self.fd, self.size, self.psize, self.records = fd, size, psize, records
        self.keys = memoryview(leaves.data)
        self.mapped: mmap.mmap | None = None
        self.view: np.ndarray[Any, Any] = np.empty(0, np.uint8)
        self.data = memoryview(b"")

    @classmethod
    def open(cls, path: Path, spec: dict[str, Any]) -> _Pages | None:
        """None when the pages are not what planning saw (then LMDB reads the shard)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            size, psize = os.fstat(fd).st_size, int(spec["psize"])
            leaves = read_leaves(fd, psize, spec["leaves"])
            records = leaf_records(leaves, psize, spec["leaves"], size) if leaves is not None else None
            if leaves is not None and records is not None and len(records) == int(spec["count"]):
                pages = cls(fd, size, psize, leaves, records)
                if pages.key(0) == unhex(spec["first"]):
                    return pages
        except OSError:
            pass
        os.close(fd)
        return None

    def key(self, offset: int) -> bytes | None:
        if self.records.damaged[offset] == BAD_NODE:
            return None
        at = int(self.records.key_at[offset])
        return bytes(self.keys[at : at + int(self.records.key_len[offset])])

    def value(self, offset: int) -> memoryview:
        at = int(self.records.value_at[offset])
        return self.data[at : at + int(self.records.value_len[offset])]

    def map(self) -> None:
        """Map the file: ``view`` and ``data`` then hold every value at its file offset; overflow pages are
        checked before any value is read."""
        self.mapped = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)
        self.view = np.frombuffer(self.mapped, np.uint8)
        self.data = memoryview(self.mapped)
        check_overflow(self.records, self.view, 0, self.psize, 0, len(self.records))

    def close(self) -> None:
        self.view = np.empty(0, np.uint8)
        with contextlib.suppress(BufferError):  # a view of it still alive somewhere: the collector unmaps it
            self.data.release()
            if self.mapped is not None:
                self.mapped.close()
        os.close(self.fd)


Match = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]


def _gather(view: np.ndarray[Any, Any], ok: np.ndarray[Any, Any], at: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``view[at]`` where ``ok``, and a harmless byte elsewhere (rows already ruled out are never read past)."""
    out: np.ndarray[Any, Any] = view[np.where(ok, at, 0)].astype(np.int64)
    return out


def _match_raw(
    view: np.ndarray[Any, Any], at: np.ndarray[Any, Any], length: np.ndarray[Any, Any], layout: Any
) -> Match:
    """Which raw records are exactly ``head`` + pixels + (label, maybe ``encoded: false``), and their labels."""
    head = np.frombuffer(layout.head, np.uint8)
    body = head.size + layout.size
    ok = (length >= body + 2) & (at >= 0) & (at + length <= view.size)
    if not ok.any():
        return ok, np.zeros(at.shape, np.int64), np.zeros(at.shape, np.int64)
    rows = np.where(ok[:, None], at[:, None] + np.arange(head.size), 0)
    ok &= (view[rows] == head).all(axis=1)
    tag = at + body
    tail = length - body
    ok &= _gather(view, ok, tag) == 0x28
    b1 = _gather(view, ok, tag + 1)
    one = b1 < 0x80
    b2 = _gather(view, ok & ~one & (tail >= 3), tag + 2)
    ok &= one | ((tail >= 3) & (b2 < 0x80))
    labels = np.where(one, b1, (b1 & 0x7F) | (b2 << 7))
    used = np.where(one, 2, 3)
    rest = tail - used
    more = ok & (rest == 2)
    ok &= (rest == 0) | (more & (_gather(view, more, tag + used) == 0x38) & (_gather(view, more, tag + used + 1) == 0))
    return ok, labels, used


def _match_floats(
    view: np.ndarray[Any, Any], at: np.ndarray[Any, Any], length: np.ndarray[Any, Any], layout: Any
) -> Match:
    """Which float records are ``head`` + label + unpacked floats + ``tail``; their labels and float offsets."""
    head = np.frombuffer(layout.head, np.uint8)
    ok = (length >= head.size + 3) & (at >= 0) & (at + length <= view.size)
    if not ok.any():
        return ok, np.zeros(at.shape, np.int64), np.zeros(at.shape, np.int64)
    rows = np.where(ok[:, None], at[:, None] + np.arange(head.size), 0)
    ok &= (view[rows] == head).all(axis=1)
    tag = at + head.size
    ok &= _gather(view, ok, tag) == 0x28
    b1 = _gather(view, ok, tag + 1)
    b2 = _gather(view, ok, tag + 2)
    one = b1 < 0x80
    ok &= one | (b2 < 0x80)
    labels = np.where(one, b1, (b1 & 0x7F) | (b2 << 7))
    starts = np.where(one, head.size + 2, head.size + 3)
    ok &= length == starts + layout.size + len(layout.tail)
    if layout.tail:
        end = at + length
        ok &= (_gather(view, ok, end - 2) == 0x38) & (_gather(view, ok, end - 1) == 0)
    return ok, labels, starts


class _MsgpackReader(_NumericReader):
    """msgpack records (``records/msgpacked.py``): an encoded image is judged by the image checks; an array
    (msgpack-numpy's encoding, or bare pixels with their shape) goes, batched by dtype and shape, to the numeric
    checks; the labels go to the label checks."""

    kind = "msgpack"

    def read_record(self, value: bytes | memoryview) -> MsgpackRecord:
        """The record a value holds; MsgpackError when it holds none."""
        from ..records.msgpacked import read_record

        return read_record(value)

    def loop(self, it: Iterator[tuple[int, Any]]) -> Iterator[Any]:
        from ..records.msgpacked import MsgpackError
        from ..records.pickles import PickleDamaged, PickleRefused

        since = self.start
        for pos, value in it:
            key = self.key(pos)
            if key is not None:  # every label run's first and last record is located (at every unlabelled one)
                self.remember(pos, key)
            try:
                record = self.read_record(value)
            except (MsgpackError, PickleDamaged, PickleRefused) as exc:
                self.labels.append(NO_LABEL)
                yield self.bad_value(pos, key, value, str(exc), refused=isinstance(exc, PickleRefused))
                continue
            if record.image is None and record.array is None:
                self.labels.append(NO_LABEL)
                yield self.bad_value(pos, key, value, f"a {self.kind} record without an encoded image or an array")
                continue
            label = yield from self._label(pos, key, record.label)
            self.labels.append(label if label is not None else NO_LABEL)
            if record.label is None and self.spec.get("labelled"):
                detail = "no label, where (nearly) every record sampled carries one: the loader fails on reading it"
                yield ReadFailure("R001", self.location(pos, key, detail), items=0)
            if record.image is not None:
                self.accounted += 1  # an item of its own
                named = label if label is not None else _class_name(record.label)  # for duplicate-image
                yield EncodedImage(data=record.image, location=self.location(pos, key), label=named, nbytes=len(value))
            elif record.array is not None:  # counted by the record tally, as .npy records are
                self.nbytes += len(value)
                array = record.array
                self.count_shape("x".join(map(str, array.shape)), pos, key)
                if array.dtype.kind in "biufc":
                    batch = self.batch(*_as_real(array.dtype, array.shape))
                    batch.add(pos, np.ascontiguousarray(array).tobytes())
                    if batch.full:
                        self.mark(pos)
                        yield from self.flush(pos + 1)
                        since = pos + 1
                        continue
            if len(self.labels) >= BLOCK_RECORDS or pos + 1 - since >= BLOCK_RECORDS:
                self.mark(pos)
                yield from self.flush(pos + 1)
                since = pos + 1

    def _label(self, pos: int, key: Any, label: Any) -> Generator[Any, None, int | None]:
        """The class id a stored label is (None: none), reporting a label that is no class id."""
        from ..records.msgpacked import is_number

        if label is not None and not is_number(label):
            name = label.decode("utf-8", "replace") if isinstance(label, bytes) else label
            detail = f"records whose label is no number (such as {name!r}): left out of the label checks"
            yield Note(info={"lmdb.labels": detail})
            return None
        if isinstance(label, float) and self.spec.get("targets"):  # regression targets: only NaN and Inf hurt
            if not math.isfinite(label):
                code, what = ("V001", "NaN") if math.isnan(label) else ("V002", "infinite")
                detail = f"label {label!r}: a {what} regression target makes the loss {what}"
                yield ReadFailure(code, self.location(pos, key, detail), items=0, values=1)
            return None
        if isinstance(label, float):  # 3.0 is class 3; 2.5 or NaN is no class id
            if label.is_integer():
                return int(label)
            yield ReadFailure("L002", self.location(pos, key, f"label {label!r} is not a class id"), items=0)
            return None
        if label is not None and not -(1 << 63) <= label < 1 << 63:  # beyond any class id (a uint64 sentinel)
            yield ReadFailure(
                "L002", self.location(pos, key, f"label {label} is beyond the signed 64-bit range"), items=0
            )
            return None
        return label if label is None else int(label)

    def blocks(self, end: int) -> Iterator[Any]:
        yield from super().blocks(end)
        yield from self._label_blocks()


class _PickleReader(_MsgpackReader):
    """Pickles of plain data (``records/pickles.py``: ImageFolderLMDB's ``(jpeg_bytes, label)``), loaded with
    every global refused, and read as msgpack records are; a pickle that needs a global is pickled-records."""

    kind = "pickled"
    reads_pickles = True

    def read_record(self, value: bytes | memoryview) -> MsgpackRecord:
        from ..records.pickles import read_record

        return read_record(value)


def _class_name(label: Any) -> str | None:
    """A label stored as text (``"dog"``), which the label checks leave out, as the class name it is."""
    if isinstance(label, bytes):
        return label.decode("utf-8", "replace")
    return label if isinstance(label, str) else None


READERS: dict[str, type[_Reader]] = {
    "datum": _DatumReader,
    "npy": _NumericReader,
    "raw": _NumericReader,
    "image": _ImageReader,
    "msgpack": _MsgpackReader,
    PICKLE: _PickleReader,
}
