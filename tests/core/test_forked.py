"""Work done item by item in a forked child: an item that kills the child or hangs it costs that item."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from scanner_service.forked import Died, each, stall_reason


def test_an_item_that_hangs_is_reported_and_the_next_items_are_done(tmp_path: Path) -> None:
    """A library that never returns on one file (planning an HDF5 file, reading a file swapped for a named
    pipe) held the scan forever: the parent waited on the pipe. The child is now killed after ``stall_s``
    without a result, the item is reported as the one it hung on, and a new child does the rest."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)

    def work(i: int) -> int:
        if i == 1:
            pipe.read_bytes()  # blocks in the kernel until a writer comes: none does
        if i == 3:
            os.kill(os.getpid(), signal.SIGSEGV)
        return i * 10

    started = time.monotonic()
    results = list(each(5, work, stall_s=0.5))
    assert results == [
        (0, 0),
        (1, Died(stall_reason(0.5))),
        (2, 20),
        (3, Died("the reading process was killed by SIGSEGV")),
        (4, 40),
    ]
    assert time.monotonic() - started < 10


def test_slow_items_that_keep_coming_are_not_taken_for_hung() -> None:
    """The stall time counts from the last result: work slower in total than ``stall_s`` goes on."""

    def work(i: int) -> int:
        time.sleep(0.2)
        return i

    assert list(each(6, work, stall_s=0.5)) == [(i, i) for i in range(6)]
