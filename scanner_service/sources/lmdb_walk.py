"""Walking an LMDB environment's keys in a child process, so that a damaged one cannot take dscan down.

A damaged B-tree page can end the reading process with a segfault or an LMDB assertion (abort), and a
truncated ``data.mdb`` with SIGBUS when the map is touched. Planning (and splitting a shard that crashed its
reader) walks keys, so it runs in a forked child that streams what it finds through a pipe: the parent
keeps everything the child reported before it died, and asks a second child to retrace the last stretch
key by key (each key written to shared memory, which survives the crash) to find the exact last good key.

The walk reads keys only (``values=False``; no readahead), except for the few values sampled to detect the
decoder. Nothing is ever written: the environment is opened read-only and without a lock file.
"""

from __future__ import annotations

import contextlib
import mmap
import operator
import os
import pickle
import select
import signal
import struct
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import lmdb

from ..forked import STALL_S, crashes_expected, exit_reason, stall_reason

CHUNK = 1 << 16
"""Keys taken from the cursor at a time (a list of them is held while walking)."""
TRACE_KEY = 1024
"""Room for one key in the trace (LMDB keys are at most 511 bytes by default)."""
TRACE_BYTES = 16 + 2 * TRACE_KEY
"""Shared memory for the key-by-key trace: keys walked, the first and the last key's lengths, the two keys."""
SAMPLE_BYTES = 16 << 20
"""At most this many bytes of sampled values."""
HEAD = 64
"""Bytes of a looked-up value reported (enough to tell an image)."""


def open_env(path: Path, subdir: bool, readahead: bool = True) -> Any:
    """Open read-only, without a lock file: nothing is ever created or written next to the data."""
    return lmdb.open(
        str(path),
        subdir=subdir,
        readonly=True,
        lock=False,
        create=False,
        readahead=readahead,
        max_readers=1,
        max_spare_txns=0,
    )


@dataclass(slots=True)
class Job:
    """What one child walks: from ``start`` (or the first/last key), forward or backward."""

    start: bytes | None = None
    skip_first: bool = False
    """Start at the key after ``start`` (before it, walking backward)."""
    backward: bool = False
    stop: bytes | None = None
    """Stop before reaching this key (exclusive; above it when walking backward)."""
    per: int = 0
    """Records per range; 0 means: computed from ``shard_bytes`` and the environment's mean record size."""
    shard_bytes: int = 64 << 20
    limit: int | None = None
    meta: bool = False
    sample: int = 0
    """Values to sample after the walk: half from the first records, half spread over the ranges."""
    sample_keys: list[bytes] = field(default_factory=list)
    """Keys to sample values from when there is no walk to spread the sample over."""
    lookup: list[bytes] = field(default_factory=list)
    """Keys to look up: those present are reported with their value's first ``HEAD`` bytes."""
    walk: bool = True
    trace: bool = False
    """Write every key to shared memory (slow; used to retrace a stretch that killed a walker)."""


@dataclass(slots=True)
class Walk:
    """What a walker child reported, in walking order."""

    open_error: str | None = None
    meta: dict[str, int] = field(default_factory=dict)
    per: int = 0
    ranges: list[tuple[int, int, bytes, bytes]] = field(default_factory=list)
    """(offset, count, first key walked, last key walked) of each complete range."""
    done: int | None = None
    """Keys walked, when the walk ended normally."""
    failure: str | None = None
    """Why the walk stopped early: LMDB's error, or how the child died."""
    sample: list[bytes] = field(default_factory=list)
    sample_failure: str | None = None
    found: dict[bytes, bytes] = field(default_factory=dict)
    """The keys of ``lookup`` that are present, with the first ``HEAD`` bytes of their values."""
    traced: tuple[int, bytes, bytes] | None = None
    """With ``trace``: keys walked (up to the failure), the first and the last of them."""
    disorder: tuple[int, bytes, bytes] | None = None
    """The first key a forward walk met out of order: its offset, the key walked before it, and the key."""

    @property
    def walked(self) -> int:
        return self.ranges[-1][0] + self.ranges[-1][1] if self.ranges else 0


Sink = Callable[[Any], None]


def _pipe_sink(fd: int) -> Sink:
    def send(message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(struct.pack("<I", len(data)) + data)
        while view:
            view = view[os.write(fd, view) :]

    return send


MAX_SHARD_RECORDS = 1 << 18
"""Records per shard at most (shards are then cut at the nearest leaf page): a reader places every record of
its shard at once (about 170 bytes each), so records of a few bytes, hundreds to a page, made 64 MB of pages
cost 550 MB a reader; 262,144 cost about 45 MB."""


def records_per_shard(stat: dict[str, int], shard_bytes: int) -> int:
    """Records per shard for about ``shard_bytes`` of pages each (the mean record's share of the pages), at most
    ``MAX_SHARD_RECORDS``.

    The page counts come from the meta page; a damaged one can claim more pages than the file has (one
    flipped bit made it 8.8e12): they are bounded by the last page in use, when ``stat`` carries it."""
    pages = stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
    if "last_pgno" in stat:
        pages = min(pages, int(stat["last_pgno"]) + 1)
    mean = max(1, pages * stat["psize"] // max(1, stat["entries"]))
    return max(1, min(MAX_SHARD_RECORDS, shard_bytes // mean))


def _per(stat: dict[str, int], job: Job) -> int:
    return job.per or records_per_shard(stat, job.shard_bytes)


def _child(send: Sink, trace: mmap.mmap | None, path: Path, subdir: bool, job: Job) -> None:
    try:
        env = open_env(path, subdir, readahead=False)
    except lmdb.Error as exc:
        send(("open_error", f"{type(exc).__name__}: {exc}"))
        return
    try:
        stat = {**env.stat(), **env.info()}
        per = _per(stat, job)
        send(("meta", stat, per))
        with env.begin(buffers=False) as txn:
            for key in job.lookup:  # before the walk, which a damaged page can end
                with contextlib.suppress(lmdb.Error):  # a damaged page on the way: reported by the walks
                    value = txn.get(key)
                    if value is not None:
                        send(("found", key, value[:HEAD]))
            firsts = _walk_keys(send, trace, txn, job, per) if job.walk else list(job.sample_keys)
        if job.sample:
            _sample(send, env, job.sample, firsts)
    finally:
        env.close()


def _position(cursor: Any, job: Job) -> bool:
    if job.start is None:
        return bool(cursor.last() if job.backward else cursor.first())
    if job.backward:
        if not cursor.set_range(job.start):
            return bool(cursor.last())
        if cursor.key() == job.start and not job.skip_first:
            return True
        return bool(cursor.prev())
    if not cursor.set_range(job.start):
        return False
    if job.skip_first and cursor.key() == job.start:
        return bool(cursor.next())
    return True


def _walk_keys(send: Sink, trace: mmap.mmap | None, txn: Any, job: Job, per: int) -> list[bytes]:
    """Walk and report ranges of ``per`` keys; returns the first key of each range (for sampling)."""
    firsts: list[bytes] = []
    walked = start = 0
    first: bytes | None = None
    last = b""
    disordered = False

    def close() -> None:
        nonlocal first
        if first is not None:
            send(("range", start, walked - start, first, last))
            first = None

    cursor = txn.cursor()
    step = 1 if job.trace else CHUNK
    try:
        if not _position(cursor, job):
            send(("done", 0))
            return firsts
        keys: Iterator[bytes] = (
            cursor.iterprev(keys=True, values=False) if job.backward else cursor.iternext(keys=True, values=False)
        )
        if job.trace:
            keys = _traced(keys, trace, job.stop, job.backward)
        while job.limit is None or walked < job.limit:
            take = min(per - (walked - start if first is not None else 0), step)
            if job.limit is not None:
                take = min(take, job.limit - walked)
            chunk = list(islice(keys, take))
            if job.stop is not None and chunk:
                chunk = _before_stop(chunk, job.stop, job.backward)
            if not chunk:
                break
            if not job.backward and not disordered:
                disordered = _disorder(send, chunk, walked, last if walked else None)
            if first is None:
                first, start = chunk[0], walked
                firsts.append(first)
            walked += len(chunk)
            last = chunk[-1]
            if walked - start >= per:
                close()
            if len(chunk) < take:
                break
        close()
        send(("done", walked))
    except lmdb.Error as exc:
        close()
        send(("failure", f"{type(exc).__name__}: {exc}"))
    return firsts


def _disorder(send: Sink, chunk: list[bytes], walked: int, before: bytes | None) -> bool:
    """Report the first key of ``chunk`` (walked forward from offset ``walked``, after ``before``) that does not
    sort after the key before it; whether there is one. LMDB reads a tree whose leaves are out of place (a
    page written over another, a damaged child page number) on without an error. An empty key is a damaged
    node, which the reader reports as such."""
    keys = chunk if before is None else [before, *chunk]
    if all(map(operator.lt, keys, keys[1:])):
        return False
    at = next((i for i in range(1, len(keys)) if keys[i] and not keys[i - 1] < keys[i]), 0)
    if not at:
        return False
    send(("disorder", walked + at - (before is not None), keys[at - 1], keys[at]))
    return True


def _before_stop(chunk: list[bytes], stop: bytes, backward: bool) -> list[bytes]:
    for i, key in enumerate(chunk):
        if (key <= stop) if backward else (key >= stop):
            return chunk[:i]
    return chunk


def _traced(keys: Iterator[bytes], trace: mmap.mmap | None, stop: bytes | None, backward: bool) -> Iterator[bytes]:
    """Record each key in shared memory before handing it on: after a crash, the last one is there."""
    assert trace is not None
    first = 0
    for n, key in enumerate(keys, 1):
        if stop is not None and ((key <= stop) if backward else (key >= stop)):
            return
        size = min(len(key), TRACE_KEY)
        if n == 1:
            first = size
            trace[16 : 16 + size] = key[:size]
        trace[16 + TRACE_KEY : 16 + TRACE_KEY + size] = key[:size]
        trace[0:16] = struct.pack("<QII", n, first, size)
        yield key


def _sample(send: Sink, env: Any, count: int, firsts: list[bytes]) -> None:
    """Send about ``count`` values, half from the first records and half spread over the key ranges, each
    as soon as it is read: what a damaged page or a crash leaves out costs only itself. Each part reads in a
    transaction of its own (LMDB fails every later call of a transaction that met a damaged page)."""
    total = 0
    failure: str | None = None

    def take(values: Iterable[bytes]) -> None:
        nonlocal total
        for value in values:
            send(("sample", [value]))
            total += len(value)
            if total >= SAMPLE_BYTES:
                return

    def ends(last: bool) -> None:
        with env.begin(buffers=False) as txn:
            cursor = txn.cursor()
            if cursor.last() if last else cursor.first():
                values = cursor.iterprev(keys=False) if last else cursor.iternext(keys=False)
                take(islice(values, (count + 1) // 2))

    try:
        ends(last=False)
    except lmdb.Error as exc:  # a damaged page on the way: the spread keys may still be reachable
        failure = f"{type(exc).__name__}: {exc}"
    for key in firsts[1 :: max(1, len(firsts) // max(1, count // 2))][: count // 2]:
        if total >= SAMPLE_BYTES:
            break
        try:
            with env.begin(buffers=False) as txn:
                value = txn.get(key)
        except lmdb.Error as exc:
            failure = failure or f"{type(exc).__name__}: {exc}"
            continue
        if value is not None:
            take([value])
    if failure is not None and total == 0:  # nothing reachable from the front: the last records, backwards
        with contextlib.suppress(lmdb.Error):
            ends(last=True)
    if failure is not None:
        send(("sample_failure", failure))


def walk(path: Path, subdir: bool, job: Job) -> Walk:
    """Run ``job`` in a forked child and collect what it reported (everything up to a crash)."""
    if not hasattr(os, "fork"):  # pragma: no cover - no fork: walk here, without crash isolation
        return _walk_here(path, subdir, job)
    trace = mmap.mmap(-1, TRACE_BYTES) if job.trace else None
    with tempfile.TemporaryFile() as errors:
        data, status, stalled = _fork(path, subdir, job, trace, errors.fileno())
        result = _collect(data)
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            errors.seek(0)
            reason = exit_reason(status) + _assertion(errors.read(1 << 16).decode("utf-8", "replace"))
            if stalled:
                reason = stall_reason(STALL_S)
            if result.failure is None and result.done is None:
                result.failure = reason
            elif result.sample_failure is None and job.sample and not result.sample:
                result.sample_failure = reason
    if trace is not None:
        n, first, last = struct.unpack("<QII", trace[0:16])
        result.traced = (int(n), bytes(trace[16 : 16 + first]), bytes(trace[16 + TRACE_KEY : 16 + TRACE_KEY + last]))
        trace.close()
    return result


def _fork(path: Path, subdir: bool, job: Job, trace: mmap.mmap | None, errors: int) -> tuple[bytes, int, bool]:
    """Fork the walker; returns everything it wrote to the pipe, its wait status, and whether it was killed
    for making no progress (LMDB walking a damaged tree round in a loop)."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the child runs no Python locks
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
        code = 0
        try:
            crashes_expected()
            os.close(read_fd)
            os.dup2(errors, 2)  # LMDB's assertion messages, for the finding
            _child(_pipe_sink(write_fd), trace, path, subdir, job)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    data = bytearray()
    stalled = False
    try:
        while True:
            if not select.select([read_fd], [], [], STALL_S)[0]:
                stalled = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    return bytes(data), status, stalled


def _assertion(stderr: str) -> str:
    """LMDB's assertion message, when the child aborted on one: `` (mdb.c:6273: Assertion 'IS_LEAF(mp)' ...)``."""
    for line in reversed(stderr.splitlines()):
        if "Assertion" in line:
            text = line.strip()
            return f" ({text[text.rfind('/') + 1 :] if '/' in text.split(':')[0] else text})"
    return ""


def _collect(data: bytes) -> Walk:
    result = Walk()
    pos = 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from("<I", data, pos)
        if pos + 4 + size > len(data):
            break
        message = pickle.loads(data[pos + 4 : pos + 4 + size])  # our own child's messages
        pos += 4 + size
        kind = message[0]
        if kind == "open_error":
            result.open_error = message[1]
        elif kind == "meta":
            result.meta, result.per = message[1], message[2]
        elif kind == "range":
            result.ranges.append((message[1], message[2], message[3], message[4]))
        elif kind == "done":
            result.done = message[1]
        elif kind == "failure":
            result.failure = message[1]
        elif kind == "sample":
            result.sample.extend(message[1])
        elif kind == "sample_failure":
            result.sample_failure = message[1]
        elif kind == "found":
            result.found[message[1]] = message[2]
        elif kind == "disorder":
            result.disorder = (message[1], message[2], message[3])
    return result


def _walk_here(path: Path, subdir: bool, job: Job) -> Walk:  # pragma: no cover - platforms without fork
    messages: list[Any] = []
    _child(messages.append, None, path, subdir, job)
    data = b"".join(
        struct.pack("<I", len(p)) + p for p in (pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL) for m in messages)
    )
    return _collect(data)
