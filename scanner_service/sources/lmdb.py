"""LMDB environments (Caffe's Data layer, many PyTorch pipelines), record by record.

The environment is a folder holding ``data.mdb``, or the ``data.mdb`` file itself. It is opened read-only
and without a lock file: a scan leaves every byte, size and time stamp of the dataset as it was.

Planning reads the B-tree's pages (``lmdb_pages``): every leaf's record count and first and last key, cut
into ranges of an equal number of records, without touching a value. When the file is not one that reader
fully understands, the keys are walked with LMDB in a child process instead (``lmdb_walk``); a walk that a
damaged page stops or kills plans what it reached, walks back from the last key to reach the tail, and
reports the part in between as ``lmdb-corrupt``. The value decoder is ``--decoder`` or detected from a sample
of values.

Reading is ``lmdb_read``: a Datum shard planned from the pages is read straight from the file and judged a
block at a time with numpy; other shards go through LMDB's cursor. Keys are not kept per record: the few
locations a finding needs are looked up afterwards by position.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb

from ..errors import UnsupportedSource
from ..forked import stalled
from ..items import ReadFailure
from ..labels import label_tally
from ..location import Location
from ..partial import Partial
from ..records import PICKLE, Decoder, parse_decoder
from .base import Plan, Shard, Source, SourceInfo, note_unused_labels
from .lmdb_files import DATA_FILE, is_lmdb_source
from .lmdb_pages import (
    Leaf,
    cut,
    damaged_meta,
    is_database_record,
    main_flags,
    out_of_order,
    overlooked_meta,
    read_tree,
    sample_values,
)
from .lmdb_read import (
    BOOKKEEPING_KEYS,
    BOOKKEEPING_NOTE,
    LABEL_STREAM,
    READERS,
    _DatumReader,
    _Pages,
    bookkeeping_kind,
    key_text,
    keys_out_of_order,
    unhex,
)
from .lmdb_walk import Job, Walk, open_env, records_per_shard, walk
from .walk import Outside

if TYPE_CHECKING:
    from ..records.msgpacked import MsgpackRecord

SAMPLE = 32
"""Values sampled to detect the decoder."""
RECORD_BYTES = 11
"""The least room a record takes in a leaf page: its 2-byte node pointer, the 8-byte node header, a 1-byte key."""
OUT_OF_ORDER = (
    "LMDB reads on without an error, but a read in key order meets records twice or out of place, and a lookup "
    "by key (txn.get) finds nothing for the records here"
)


class LmdbSource(Source):
    """An LMDB environment: a folder holding ``data.mdb``, or a ``data.mdb`` file (any LMDB data file)."""

    kind = "lmdb"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        return is_lmdb_source(path)

    @property
    def subdir(self) -> bool:
        return self.path.is_dir()

    @property
    def data_file(self) -> Path:
        return self.path / DATA_FILE if self.subdir else self.path

    def decoder(self) -> Decoder | None:
        return parse_decoder(self.config.decoder) if self.config.decoder else None

    # -- planning -------------------------------------------------------------------------------

    def plan(self) -> Plan:
        partial = Partial(cap=self.config.max_locations)
        rel = self.relative(self.data_file)
        refused = self.outside(self.data_file)
        if refused is not None:
            partial.add("S001", Location(path=rel, detail=refused))
            info = SourceInfo(kind=self.kind, path=str(self.path), root=str(self.root), files=1)
            return Plan(source=info, shards=[], partial=partial)
        chosen = self.decoder()
        size = self.data_file.stat().st_size
        if not os.access(self.data_file, os.R_OK):  # (LMDB's own error says "read-only", and calls it damage)
            partial.add("S001", Location(path=rel, detail="permission denied: the data file cannot be read"))
            return Plan(
                source=SourceInfo(kind=self.kind, path=str(self.path), root=str(self.root), files=1),
                shards=[],
                partial=partial,
            )
        info = SourceInfo(kind=self.kind, path=str(self.path), root=str(self.root), files=1, bytes=size)
        if size == 0:
            partial.add("R004", Location(path=rel, detail=f"{rel} is empty (0 bytes): no LMDB environment"))
            return Plan(source=info, shards=[], partial=partial)
        damaged = damaged_meta(self.data_file)
        if damaged is not None:
            partial.add("R004", Location(path=rel, detail=damaged))
        tree = read_tree(self.data_file)
        if tree is not None:  # the leaves' counts and keys, read from the pages: no key walk needed
            forward = Walk(meta=tree.meta, done=tree.entries)
        else:
            job = Job(meta=True, sample=SAMPLE if chosen is None else 0, shard_bytes=self.config.shard_bytes)
            forward = walk(self.path, self.subdir, job)
            if forward.open_error is not None or not forward.meta:
                reason = forward.open_error or forward.failure or "unknown error"
                partial.add("R004", Location(path=rel, detail=f"the LMDB environment cannot be opened: {reason}"))
                return Plan(source=info, shards=[], partial=partial)
        meta = forward.meta
        in_use = (int(meta["last_pgno"]) + 1) * int(meta["psize"])
        if size > in_use:  # a writer that maps with writemap extends the file to the whole map: the rest is a hole
            size = info.bytes = in_use
        entries = int(meta["entries"])
        per = records_per_shard(meta, self.config.shard_bytes)
        info.items = entries
        planner = _Planner(self, rel, entries, per)
        planner.capacity = max(size, in_use) // RECORD_BYTES  # the pages the meta page names, even past a cut
        if tree is not None:
            ranges = cut(tree.leaves, per)
            planner.head, planner.reached = [r for r, _pages in ranges], entries
            planner.leaves = {r[0]: pages for r, pages in ranges}
            planner.psize = tree.psize
            self._check_order(tree.leaves, rel, partial)
        else:
            planner.add_forward(forward)
            if forward.disorder is not None and main_flags(self.data_file) == 0:  # else not in bytewise order
                self._walked_out_of_order(forward.disorder, rel, partial)
            if forward.failure is not None:
                planner.recover(forward)
        if planner.walked == 0 and entries == 0 and forward.failure is None:
            stale = overlooked_meta(self.data_file)
            if stale is not None:
                used, other, records = stale
                detail = (
                    f"damaged meta page: LMDB opens transaction {used:,}, an empty database, but the other meta "
                    f"page records transaction {other:,} with {records:,} records (a damaged transaction id?); "
                    "every reader sees no records"
                )
                partial.add("R004", Location(path=rel, detail=detail))
            else:
                partial.add("S006", Location(path=rel, detail="the LMDB environment holds no records"))
        self._check_size(meta, size, rel, partial, planner.failure is None and planner.walked >= entries)
        planner.report(partial)
        if planner.count_damaged:  # a count too low, or more than the file holds (reported): the tree's is true
            entries = planner.entries = info.items = planner.walked
        if chosen is None and tree is not None and tree.entries:
            forward.sample = sample_values(self.data_file, tree, SAMPLE) or []
        if chosen is None and planner.walked and not forward.sample:
            keys = [first for _pos, _n, first, _last in planner.head + planner.tail]
            again = walk(self.path, self.subdir, Job(walk=False, sample=SAMPLE, sample_keys=keys))
            if again.open_error is not None:
                detail = f"the LMDB environment cannot be opened: {again.open_error}"
                partial.add("R004", Location(path=rel, detail=detail))
                return Plan(source=info, shards=[], partial=partial)
            forward.sample, forward.sample_failure = again.sample, again.sample_failure or again.failure
        decoder, how = self._choose(chosen, forward, rel, partial, planner)
        partial.info["lmdb.records"] = str(entries)
        note_unused_labels(partial, self.config, "an LMDB's labels are in its records")
        partial.info["lmdb.liblmdb"] = ".".join(map(str, lmdb.version()))
        shards: list[Shard] = []
        if decoder is not None:
            partial.info["lmdb.decoder"] = f"{decoder} ({how})"
            if decoder.name == "datum":
                from ..records.datum import protobuf_backend

                partial.info["lmdb.datum_parser"] = protobuf_backend()
                label_tally(partial, LABEL_STREAM, "i", self.config.run_threshold).path = rel
            sample = forward.sample or []
            records = decoder.name == "msgpack" or (decoder.name == PICKLE and _plain_pickles(sample))
            found = _SampledLabels.of(sample, decoder.name) if records else None
            targets = found is not None and found.fractional and self.config.num_classes is None
            if targets:
                partial.info["lmdb.labels"] = (
                    "the records' labels are mostly fractional numbers (regression targets, not class ids): "
                    "no label checks; a NaN or infinite one is reported (give --num-classes to judge them as classes)"
                )
            elif found is not None and found.labelled:
                label_tally(partial, LABEL_STREAM, "i", self.config.run_threshold).path = rel
            if decoder.name != PICKLE or records:
                shards = planner.shards(str(decoder), size)
            for shard in shards:
                if found is not None and found.all_labelled:  # a record without a label: the loader fails on it
                    shard.spec["labelled"] = True
                if targets:
                    shard.spec["targets"] = True
        return Plan(source=info, shards=shards, partial=partial)

    def _check_order(self, leaves: list[Leaf], rel: str, partial: Partial) -> None:
        disorder = out_of_order(leaves)
        if disorder is None:
            return
        pos, prev, leaf = disorder
        detail = (
            f"keys out of order: this key (record {pos:,}, the first of leaf page {leaf.pgno}) should sort after key "
            f"{key_text(prev.last)} (the last of leaf page {prev.pgno}) and at or after the branch key "
            f"{key_text(leaf.low)} that leads to it, and does not: a damaged branch page names the wrong leaf, or "
            f"a key is damaged. {OUT_OF_ORDER}"
        )
        partial.add("R004", Location(path=rel, key=key_text(leaf.first), index=pos, detail=detail))

    def _walked_out_of_order(self, disorder: tuple[int, bytes, bytes], rel: str, partial: Partial) -> None:
        """A key the walk met after a key that sorts after it: leaf pages out of place (their page headers
        name other pages, so the tree was not read from the pages, where ``_check_order`` would tell)."""
        pos, before, found = disorder
        detail = (
            f"keys out of order: this key (record {pos:,}) comes after key {key_text(before)} in LMDB's reading "
            f"order, and should sort before it: leaf pages out of place (written over one another, or a damaged "
            f"branch page). {OUT_OF_ORDER}"
        )
        partial.add("R004", Location(path=rel, key=key_text(found), index=pos, detail=detail))

    def _check_size(self, meta: dict[str, int], size: int, rel: str, partial: Partial, complete: bool) -> None:
        """The meta page's page counts against the file; ``complete``: the walk read every record counted."""
        in_use = int(meta["last_pgno"]) + 1
        counted = sum(int(meta.get(k, 0)) for k in ("branch_pages", "leaf_pages", "overflow_pages"))
        if counted > in_use:
            detail = (
                f"damaged meta page: it counts {counted:,} pages in the database, but the environment has "
                f"{in_use:,} (pages 0-{in_use - 1}); the records were read by walking the keys"
            )
            partial.add("R004", Location(path=rel, detail=detail))
        needed = in_use * int(meta["psize"])
        if size >= needed:
            return
        if complete:  # every record's key was reached in the file as it is (values on overflow pages were not)
            detail = (
                f"{rel} has {size:,} bytes, but its meta page says the environment uses {needed:,} (pages "
                f"0-{meta['last_pgno']}): the file was cut short, or that page number is damaged. Every record's "
                "key was reached; a record whose value lay in the missing pages is reported at its key"
            )
        else:
            detail = (
                f"{rel} is truncated: {size:,} bytes, but the environment uses {needed:,} "
                f"(pages 0-{meta['last_pgno']}); records stored past the end are lost"
            )
        partial.add("R004", Location(path=rel, detail=detail))

    def _choose(
        self, chosen: Decoder | None, forward: Walk, rel: str, partial: Partial, planner: _Planner
    ) -> tuple[Decoder | None, str]:
        if chosen is not None:
            return chosen, "--decoder"
        if planner.walked == 0:
            return None, ""
        from ..records.detect import detect

        found = detect(forward.sample)
        first = planner.first_key()
        if found.decoder is None and forward.sample and all(map(is_database_record, forward.sample)):
            raise UnsupportedSource(
                f"{rel} keeps its records in named databases (the first is {key_text(first)!r}): dscan reads an "
                "environment's main database only; copy the named database's records into the main database of "
                "a new environment (lmdb.open(path, max_dbs=1).open_db(name)) and scan that",
                str(self.path),
            )
        if found.decoder is None:
            head = forward.sample[0][:16].hex(" ") if forward.sample else "?"
            detail = (
                f"{found.describe()} (the first starts with {head}); none of the records was scanned: "
                "pass --decoder datum, image, npy, msgpack or raw:DTYPE:SHAPE"
            )
            if forward.sample_failure:
                detail = f"the values could not be sampled ({forward.sample_failure}); none was scanned"
            where = Location(path=rel, key=key_text(first), index=0 if planner.head else None, detail=detail)
            partial.add_many("R001", planner.walked, planner.walked, [where])
            return None, ""
        if found.decoder.name == PICKLE and _plain_pickles(forward.sample):
            return found.decoder, f"{found.describe()}; plain data, loaded with every global refused"
        if found.decoder.name == PICKLE:
            from ..records.pickles import describe, pickle_protocol

            protocol = next((p for p in map(pickle_protocol, forward.sample) if p is not None), 0)
            own, pos, sample = self._writers_records(partial, (planner.head + planner.tail)[0])
            count = planner.walked - own
            where = Location(
                path=rel,
                key=key_text(sample),
                index=pos,
                detail=(
                    f"the values are pickled Python objects ({describe(protocol)}; {found.describe()}) that need "
                    "globals (numpy arrays, classes: loading them runs code) or hold no image: dscan loads only "
                    f"pickles of plain data, so none of the {count:,} records was scanned"
                ),
            )
            partial.add_many("R005", count, count, [where])
        return found.decoder, found.describe()

    def _writers_records(self, partial: Partial, first: Range) -> tuple[int, int, bytes]:
        """The records a writer keeps beside the samples (ImageFolderLMDB's pickled ``__keys__`` and ``__len__``),
        named in ``info``: how many there are, and the position and key of the first sample (the first key
        planned, unless it is one of them)."""
        job = Job(per=1, limit=len(BOOKKEEPING_KEYS) + 1, lookup=sorted(BOOKKEEPING_KEYS))
        found = walk(self.path, self.subdir, job)
        own = {k for k, head in found.found.items() if bookkeeping_kind(k, head) is not None}
        for k in sorted(own):
            partial.info[f"lmdb.bookkeeping {key_text(k)}"] = BOOKKEEPING_NOTE
        pos, sample = next(((off, k) for off, _n, k, _last in found.ranges if k not in own), (first[0], first[2]))
        return len(own), pos, sample

    # -- crash isolation -------------------------------------------------------------------------

    def split(self, shard: Shard) -> list[Shard]:
        spec = shard.spec
        count = int(spec["count"])
        if count <= 1:
            return []
        half = (count + 1) // 2
        found = walk(self.path, self.subdir, Job(start=unhex(spec["first"]), per=half, limit=count))
        if found.failure is not None or found.walked != count or len(found.ranges) != 2:
            return []
        pieces = []
        prev = spec.get("prev")
        whole = {k: v for k, v in spec.items() if k not in ("leaves", "psize")}  # halves are read through LMDB
        for offset, n, first, last in found.ranges:
            piece = dict(whole, first=first.hex(), last=last.hex(), prev=prev, start=spec["start"] + offset, count=n)
            pieces.append(Shard(id=shard.id, items=n, bytes=shard.bytes * n // count, spec=piece))
            prev = last.hex()
        return pieces

    def crash_finding(self, shard: Shard, reason: str) -> tuple[str, Location]:
        spec = shard.spec
        first, count, start = key_text(unhex(spec["first"])), int(spec["count"]), int(spec["start"])
        prev = key_text(unhex(spec["prev"])) if spec.get("prev") else None
        before = f"; the last good key before it is {prev}" if prev else ""
        does = "hangs" if stalled(reason) else "kills"
        if count == 1:
            detail = f"reading this record {does} the reader ({reason}): a damaged page{before}"
        else:
            last = key_text(unhex(spec["last"]))
            records = f"records {start}-{start + count - 1} (keys {first} to {last})"
            detail = f"reading {records} {does} the reader ({reason})"
        return "R004", Location(path=spec["file"], key=first, index=start, detail=detail)

    # -- reading --------------------------------------------------------------------------------

    def read(self, shard: Shard) -> Iterator[Any]:
        spec = shard.spec
        decoder = Decoder(PICKLE) if spec["decoder"] == PICKLE else parse_decoder(spec["decoder"])  # detected only
        if decoder.name == "datum" and spec.get("leaves"):
            pages = _Pages.open(self.data_file, spec)
            if pages is not None:
                try:
                    yield from _DatumReader(self, None, spec, decoder, pages).run_direct()
                except OSError as exc:  # the file changed under the scan (truncated, removed)
                    detail = f"reading the range of {spec['count']:,} records from this key failed: {exc}"
                    yield ReadFailure(
                        "R004", Location(path=spec["file"], key=key_text(unhex(spec["first"])), detail=detail)
                    )
                finally:
                    pages.close()
                return
        elif spec.get("leaves"):  # (the cursor reads the records; the pages tell whether lookups find them)
            pages = _Pages.open(self.data_file, spec)
            if pages is not None:
                try:
                    yield from keys_out_of_order(pages, spec["file"], int(spec["start"]))
                finally:
                    pages.close()
        try:
            env = open_env(self.path, self.subdir)
        except lmdb.Error as exc:
            yield ReadFailure(
                "R004",
                Location(path=spec["file"], detail=f"the LMDB environment cannot be opened: {exc}"),
                items=int(spec["count"]),
            )
            return
        try:
            reader = READERS[decoder.name](self, env, spec, decoder)
            try:
                yield from reader.run()
            finally:
                if reader.txn is not None:
                    reader.txn.abort()
        finally:
            env.close()


Range = tuple[int, int, bytes, bytes]
"""(position, records, first key, last key) of a stretch of consecutive keys, in key order."""


def _sampled_records(sample: list[bytes], decoder: str) -> list[MsgpackRecord]:
    """The records the sampled values hold (msgpack records, or pickles of plain data) with an encoded image or an
    array (not a writer's ``__keys__`` or ``__len__``)."""
    from ..records import msgpacked, pickles

    read = pickles.read_record if decoder == PICKLE else msgpacked.read_record
    out = []
    for value in sample:
        with contextlib.suppress(msgpacked.MsgpackError, pickles.PickleDamaged, pickles.PickleRefused):
            out.append(read(value))
    return [r for r in out if r.image is not None or r.array is not None]


def _plain_pickles(sample: list[bytes]) -> bool:
    """Whether the sampled pickles hold plain data (an encoded image or an array, and a label), read with every
    global refused, at least as often as they need a global (a numpy array, a class: not read)."""
    from ..records.pickles import PickleDamaged, PickleRefused, pickle_protocol, read_record

    read = refused = 0
    for value in sample:
        if pickle_protocol(value) is None:
            continue
        try:
            record = read_record(value)
        except PickleRefused:
            refused += 1
            continue
        except PickleDamaged:
            continue
        read += record.image is not None or record.array is not None  # not the writer's __keys__ or __len__
    return read > 0 and read >= refused


LABELLED_SHARE = 0.9
"""Share of the sampled records that must carry a label for one without it to be a damaged record."""


@dataclass(frozen=True, slots=True)
class _SampledLabels:
    """What the sampled records (msgpack, plain pickles) carry as labels, decoded once."""

    labelled: bool
    """Some carry a number beside their image: the records have class labels."""
    all_labelled: bool
    """Nearly every one does (``LABELLED_SHARE``; the record without one may be among those sampled): then a
    record without one is a damaged record (the loader fails on it)."""
    fractional: bool
    """Most of the numbers are finite floats with a fraction (0.37: regression targets), as the label checks
    decide for other label streams (``labels.is_classification``)."""

    @classmethod
    def of(cls, sample: list[bytes], decoder: str) -> _SampledLabels:
        import math

        from ..records.msgpacked import is_number

        labels = [record.label for record in _sampled_records(sample, decoder)]
        numbers = [v for v in labels if is_number(v)]
        fractional = [v for v in numbers if isinstance(v, float) and math.isfinite(v) and not v.is_integer()]
        return cls(
            labelled=bool(numbers),
            all_labelled=bool(labels) and len(numbers) >= LABELLED_SHARE * len(labels),
            fractional=len(fractional) * 2 > len(numbers),
        )


class _Planner:
    """Turns the walks' ranges into shards, and what they could not reach into findings."""

    def __init__(self, source: LmdbSource, rel: str, entries: int, per: int) -> None:
        self.source, self.rel, self.entries, self.per = source, rel, entries, per
        self.head: list[Range] = []
        """Ranges from the first key on."""
        self.tail: list[Range] = []
        """Ranges reached walking back from the last key (after a failure), in key order."""
        self.psize = 0
        self.leaves: dict[int, list[int]] = {}
        """Leaf page numbers of each range (by position), when planned from the pages: read without LMDB."""
        self.failure: str | None = None
        self.tail_failure: str | None = None
        self.reached = 0
        """Keys the forward walks went through."""
        self.back = 0
        """Keys the backward walks went through."""
        self.capacity = 1 << 62
        """The most records the data file could hold (a meta page that counts more is damaged)."""

    @property
    def walked(self) -> int:
        return sum(r[1] for r in self.head) + sum(r[1] for r in self.tail)

    @property
    def count_damaged(self) -> bool:
        """Whether the walk read every record and the meta page's count is wrong: too low, or impossibly high."""
        return self.failure is None and (self.walked > self.entries or self.entries > self.capacity)

    def first_key(self) -> bytes | None:
        ranges = self.head + self.tail
        return ranges[0][2] if ranges else None

    def _forward(self, found: Walk, base: int) -> None:
        self.head.extend((base + off, n, first, last) for off, n, first, last in found.ranges)
        self.reached = base + found.walked

    def _backward(self, found: Walk, base: int) -> None:
        """Backward walk offsets count from the last key: position = entries - offset - count."""
        end = self.entries - base
        self.tail[:0] = [(end - off - n, n, last, first) for off, n, first, last in reversed(found.ranges)]
        self.back = base + found.walked

    def add_forward(self, found: Walk) -> None:
        self._forward(found, 0)

    def last_good(self) -> tuple[int, bytes] | None:
        """Position and key of the last key the forward walks reached."""
        known = [(pos + n - 1, last) for pos, n, _first, last in self.head]
        return max(known) if known else None

    def recover(self, found: Walk) -> None:
        """After the walk stopped early: find its exact last good key, then walk back from the last key."""
        path, subdir = self.source.path, self.source.subdir
        self.failure = found.failure
        good = self.last_good()
        self._forward(self._retrace(good[1] if good else None, backward=False), self.reached)
        good = self.last_good()
        stop = good[1] if good else None
        back = walk(path, subdir, Job(backward=True, stop=stop, per=self.per))
        self._backward(back, 0)
        if back.failure is not None:
            self.tail_failure = back.failure
            lowest = self.tail[0][2] if self.tail else None
            self._backward(self._retrace(lowest, backward=True, stop=stop), self.back)

    def _retrace(self, after: bytes | None, backward: bool, stop: bytes | None = None) -> Walk:
        """Walk key by key past ``after`` (recording each key in shared memory) until the walk fails."""
        job = Job(start=after, skip_first=after is not None, backward=backward, stop=stop, per=1 << 62)
        job.limit, job.trace = self.per + 1, True
        again = walk(self.source.path, self.source.subdir, job)
        if not again.ranges and again.traced is not None and again.traced[0]:
            n, first, last = again.traced
            again.ranges = [(0, n, first, last)]
        return again

    def report(self, partial: Partial) -> None:
        if self.failure is None:
            if self.count_damaged and self.walked < self.entries:
                detail = (
                    f"the meta page counts {self.entries:,} records, the tree holds {self.walked:,}: the count is "
                    f"damaged (the data file has room for {self.capacity:,} records at most). Readers that take "
                    "the dataset's length from it (txn.stat()['entries'] as a Dataset's __len__) ask for records "
                    f"that do not exist; all {self.walked:,} records were scanned"
                )
                partial.add("R004", Location(path=self.rel, detail=detail))
            elif self.walked < self.entries:  # the walk ended without an error, short of the records counted
                good = self.last_good()
                detail = (
                    f"the meta page counts {self.entries:,} records, the tree holds {self.walked:,}: the tree "
                    "reached is not the one counted (a copy taken while a writer committed, or a damaged page "
                    "number); the other records cannot be read"
                )
                where = Location(
                    path=self.rel, key=key_text(good[1]) if good else None, index=good[0] if good else None
                )
                partial.add("R004", where.model_copy(update={"detail": detail}))
            elif self.walked > self.entries:  # every record read, but the count says fewer
                detail = (
                    f"the meta page counts {self.entries:,} records, the tree holds {self.walked:,}: the count is "
                    "damaged (or the file was copied while a writer committed). Readers that take the dataset's "
                    f"length from it (txn.stat()['entries'] as a Dataset's __len__) use only {self.entries:,} of "
                    "the records; all of them were scanned"
                )
                partial.add("R004", Location(path=self.rel, detail=detail))
            return
        good = self.last_good()
        lost = self.entries - self.reached - self.back
        after = f"after this key (record {good[0]})" if good is not None else "at the first key"
        detail = f"the key walk stopped {after}: {self.failure}; {lost:,} of {self.entries:,} records cannot be reached"
        if lost < 0:  # more records from both ends than the meta page counts: the tree mixes transactions
            detail = (
                f"the key walk stopped {after}: {self.failure}; walking back from the last key reached "
                f"{self.back:,} more, {self.reached + self.back:,} in all, more than the {self.entries:,} the meta "
                "page counts: its pages come from different transactions (a copy taken while a writer "
                "committed?), so which records are lost cannot be told, and the records' positions after this "
                "key are not to be trusted"
            )
        elif self.tail:
            detail += f" (walking back from the last key reached key {key_text(self.tail[0][2])})"
        elif self.tail_failure:
            detail += f" (walking back from the last key failed too: {self.tail_failure})"
        where = Location(path=self.rel, key=key_text(good[1]) if good else None, index=good[0] if good else None)
        partial.add("R004", where.model_copy(update={"detail": detail}))

    def shards(self, decoder: str, size: int) -> list[Shard]:
        out: list[Shard] = []
        per_bytes = size / max(1, self.entries)
        end = -1
        prev: str | None = None
        ranges = self.head + self.tail
        for i, (pos, n, first, last) in enumerate(ranges):
            prev = prev if pos == end else None
            after = ranges[i + 1] if i + 1 < len(ranges) else None
            spec: dict[str, Any] = {
                "file": self.rel,
                "decoder": decoder,
                "first": first.hex(),
                "last": last.hex(),
                "prev": prev,
                "next": after[2].hex() if after is not None and after[0] == pos + n else None,
                "final": after is None and (self.failure is None or bool(self.tail)),
                "start": pos,
                "count": n,
                "records": self.entries,
            }
            if pos in self.leaves:
                spec["leaves"], spec["psize"] = self.leaves[pos], self.psize
            out.append(Shard(id=len(out), items=n, bytes=int(n * per_bytes), spec=spec))
            prev, end = last.hex(), pos + n
        return out
