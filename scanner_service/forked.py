"""Work that may kill its process, done item by item in a forked child that streams the results back.

A damaged file can make a C library crash (HDF5 segfaults visiting some damaged B-tree headers): done in
the scan's own process, that ends the scan without a report. Here a child does the items in order and sends
each result through a pipe as soon as it has it; when it dies, the item it was on is reported as the one
that killed it, and a new child goes on with the next. Without ``fork`` (not Linux), the items are done in
this process.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import struct
import sys
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

HEADER = struct.Struct("<Q")
STALL_S = 120.0
"""A reading process from which nothing came for this long is taken for hung: a library in an endless loop on
a crafted file, a read that never returns (a named pipe, a dead network mount). It is killed, and its item is
reported as the one it hung on; one item is one file, or one shard's block or image."""


STALLED = "the reader made no progress"


def stall_reason(seconds: float) -> str:
    return f"{STALLED} for {seconds:,.0f} s and was stopped (a hung decoder or read)"


def stalled(reason: str) -> bool:
    """Whether a reader's end (``reason``) was a stall (``stall_reason``), not a crash."""
    return reason.startswith(STALLED)


class _Stalled(Exception):
    """Nothing came through the pipe within the stall time."""


def crashes_expected() -> None:
    """In a child whose crash becomes a finding: no fault dump on standard error. A parent that enabled
    Python's fault handler (pytest does, so does ``PYTHONFAULTHANDLER``) passes it on to a forked child, whose
    expected SIGSEGV then printed "Fatal Python error" and a traceback beside the finding."""
    faulthandler.disable()


@dataclass(frozen=True, slots=True)
class Died:
    """The child died on this item."""

    reason: str


def exit_reason(status: int) -> str:
    """How a child ended, from its ``waitpid`` status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"the reading process was killed by {name}"
    return f"the reading process exited with status {os.waitstatus_to_exitcode(status)}"


def each(count: int, work: Callable[[int], Any], stall_s: float = STALL_S) -> Iterator[tuple[int, Any]]:
    """``(i, work(i))`` for i in 0..count-1, in order; ``(i, Died(reason))`` for an item whose work killed the
    process, or on which it made no progress for ``stall_s``. ``work`` must not raise (an exception is returned
    as ``Died`` too) and its results must pickle."""
    if not sys.platform.startswith("linux"):
        for i in range(count):
            yield i, work(i)
        return
    start = 0
    while start < count:
        stopped, reason = yield from _child(start, count, work, stall_s)
        if stopped >= count:
            return
        yield stopped, Died(reason)
        start = stopped + 1


def _child(
    start: int, count: int, work: Callable[[int], Any], stall_s: float
) -> Generator[tuple[int, Any], None, tuple[int, str]]:
    """Items from ``start`` in one child; returns the index of the item it died or hung on (``count``: none)
    and how."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
        crashes_expected()
        os.close(read_end)
        code = 0
        try:
            with os.fdopen(write_end, "wb") as out:
                for i in range(start, count):
                    try:
                        result = work(i)
                    except Exception as exc:
                        result = Died(f"the reader raised {type(exc).__name__}: {exc}")
                    data = pickle.dumps((i, result), protocol=pickle.HIGHEST_PROTOCOL)
                    out.write(HEADER.pack(len(data)) + data)
                    out.flush()
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    nxt = start
    try:
        while True:
            head = _read(read_end, HEADER.size, stall_s)
            if len(head) < HEADER.size:
                break
            (size,) = HEADER.unpack(head)
            data = _read(read_end, size, stall_s)
            if len(data) < size:
                break
            i, result = pickle.loads(data)
            yield i, result
            nxt = i + 1
    except _Stalled:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return nxt, stall_reason(stall_s)
    except BaseException:  # the caller stopped early (GeneratorExit) or failed: end the child, never a zombie
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    return nxt, exit_reason(status)


def _read(fd: int, size: int, stall_s: float) -> bytes:
    """``size`` bytes from the pipe ``fd`` (fewer at its end); raises _Stalled when nothing comes for
    ``stall_s``."""
    parts: list[bytes] = []
    left = size
    while left:
        if not select.select([fd], [], [], stall_s)[0]:
            raise _Stalled
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
