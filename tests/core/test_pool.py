"""The shard pool survives readers that kill their process, and isolates the part that does it."""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scanner_service import ScanConfig, merge
from scanner_service.items import DatasetMeta, NumericBlock
from scanner_service.location import Location
from scanner_service.pool import ShardPool
from scanner_service.sources import BY_KIND
from scanner_service.sources.base import Plan, Shard, Source, SourceInfo

META = DatasetMeta("r", "records", "r", "float32", (100, 1), 1, 1)


class CrashingRecords(Source):
    """100 records; reading record 37 kills the process with SIGSEGV, record 80 with SIGABRT."""

    kind = "test-crashing"
    KILLERS = {37: signal.SIGSEGV, 80: signal.SIGABRT}
    ROWS = 25
    """Records per shard."""

    @classmethod
    def detect(cls, path: Path) -> bool:
        return False

    def plan(self) -> Plan:
        n = self.ROWS
        shards = [Shard(id=i, items=n, spec={"start": i * n, "stop": i * n + n}) for i in range(100 // n)]
        info = SourceInfo(kind=self.kind, path=str(self.path), root=str(self.path), items=100)
        return Plan(source=info, shards=shards, partial=self.empty())

    def empty(self) -> Any:
        from scanner_service.partial import Partial

        return Partial()

    def read(self, shard: Shard) -> Iterator[Any]:
        for i in range(shard.spec["start"], shard.spec["stop"]):
            if i in self.KILLERS:
                os.kill(os.getpid(), self.KILLERS[i])
            value = np.array([[np.nan if i == 90 else float(i)]], np.float32)
            yield NumericBlock(META, value, (i, 0), lambda _r, i=i: Location(path="r", index=i), items=1, nbytes=4)

    def split(self, shard: Shard) -> list[Shard]:
        a, b = shard.spec["start"], shard.spec["stop"]
        if b - a <= 1:
            return []
        mid = (a + b) // 2
        return [
            Shard(id=shard.id, items=mid - a, spec={"start": a, "stop": mid}),
            Shard(id=shard.id, items=b - mid, spec={"start": mid, "stop": b}),
        ]

    def crash_finding(self, shard: Shard, reason: str) -> tuple[str, Location]:
        return "S001", Location(path="r", index=shard.spec["start"], detail=reason)


def _scan_killing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: type[CrashingRecords], workers: int
) -> tuple[Any, list[int], ShardPool]:
    """``source``'s records through a pool of ``workers``: (merged partial, progress counts, the pool)."""
    monkeypatch.setitem(BY_KIND, source.kind, source)
    config = ScanConfig(max_locations=50)
    pool = ShardPool(source.kind, str(tmp_path), config, workers=workers)
    pool.ctx = mp.get_context("fork")  # the registry entry above must reach the workers
    faulthandler.disable()  # pytest's crash dumps would flood the output from the killed workers
    plan = source(tmp_path, config).plan()
    progress: list[int] = []
    try:
        merged = merge(pool.run(plan.shards, lambda items, _b: progress.append(items)))
    finally:
        faulthandler.enable()
    return merged, progress, pool


@pytest.mark.slow
def test_killer_records_become_findings_and_everything_else_is_scanned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    merged, progress, pool = _scan_killing(monkeypatch, tmp_path, CrashingRecords, workers=2)
    crashes = merged.findings["S001"]
    assert [(loc.index, loc.detail) for loc in crashes.locations] == [
        (37, "the reader process was killed by SIGSEGV"),
        (80, "the reader process was killed by SIGABRT"),
    ]
    assert merged.items == 100  # 98 records read, 2 reported
    assert [loc.index for loc in merged.findings["V001"].locations] == [90]
    assert sum(progress) == 100
    assert pool.workers == []


class ManyShards(CrashingRecords):
    """The same records in 20 shards of 5: with one worker, most are sent to it ahead of time."""

    kind = "test-many-shards"
    ROWS = 5


@pytest.mark.slow
def test_shards_sent_ahead_to_a_worker_that_dies_are_read_by_the_next(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    merged, progress, _ = _scan_killing(monkeypatch, tmp_path, ManyShards, workers=1)
    assert [loc.index for loc in merged.findings["S001"].locations] == [37, 80]
    assert merged.items == 100 and sum(progress) == 100  # every record once: none lost, none read twice
    assert [loc.index for loc in merged.findings["V001"].locations] == [90]


class _Conn:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)


def _fed(shards: list[Shard], workers: int) -> list[int]:
    """How many shards each worker holds after the pool's first feed (workers with fake pipes)."""
    from collections import deque

    from scanner_service.pool import _Task, _Worker

    pool = ShardPool("unused", "unused", ScanConfig(), workers)
    pool.workers = [_Worker(process=None, conn=_Conn()) for _ in range(workers)]  # type: ignore[arg-type]
    pool._feed(deque(_Task(s) for s in shards))
    return [len(w.tasks) for w in pool.workers]


def test_a_worker_gets_a_second_small_shard_while_enough_remain() -> None:
    small = [Shard(id=i, items=1, spec={"start": i}) for i in range(10)]
    assert _fed(small, 2) == [2, 2]
    assert _fed(small[:3], 2) == [1, 1]  # the last shards go to whichever worker is free first
    paths = [f"{j:0100}" for j in range(100)]  # 10 KB pickled
    big = [Shard(id=i, items=1, spec={"paths": paths}) for i in range(10)]
    assert _fed(big, 2) == [1, 1]  # only what fits a pipe's buffer is sent ahead


class SlowRecords(CrashingRecords):
    """100 records, 0.2 s each: a shard takes 5 s."""

    kind = "test-slow"
    KILLERS: dict[int, signal.Signals] = {}

    def read(self, shard: Shard) -> Iterator[Any]:
        import time

        for block in super().read(shard):
            time.sleep(0.2)
            yield block


def test_a_cancelled_run_stops_its_workers_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import time

    from scanner_service.errors import ScanCancelled

    monkeypatch.setitem(BY_KIND, SlowRecords.kind, SlowRecords)
    pool = ShardPool(SlowRecords.kind, str(tmp_path), ScanConfig(), workers=1)
    pool.ctx = mp.get_context("fork")
    plan = SlowRecords(tmp_path, ScanConfig()).plan()
    started = time.monotonic()
    asked: list[float] = []

    def cancelled() -> bool:
        asked.append(time.monotonic() - started)
        return asked[-1] > 1.0

    with pytest.raises(ScanCancelled):
        merge(pool.run(plan.shards, cancelled=cancelled))
    assert time.monotonic() - started < 4.0  # the first shard alone takes 5 s: it was not read to the end
    assert len(asked) >= 3  # asked while the worker was still reading
    assert pool.workers == []


class HangingRecords(CrashingRecords):
    """100 records; reading record 37 opens a named pipe that no one writes to: the read never returns."""

    kind = "test-hanging"
    KILLERS: dict[int, signal.Signals] = {}

    def read(self, shard: Shard) -> Iterator[Any]:
        for block in super().read(shard):
            if block.offset[0] == 37:
                with open(self.path / "pipe", "rb") as fh:  # blocks in the kernel until a writer comes
                    fh.read()
            yield block


@pytest.mark.slow
def test_a_reader_that_hangs_costs_its_record_not_the_scan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A read that never returns (a file swapped for a named pipe, a decoder in an endless loop) held the
    scan forever: the pool waited on its worker. It is now stopped after ``stall_s`` without progress, its
    shard split down to the record that hangs, which becomes a finding; every other record is scanned."""
    from scanner_service.forked import stall_reason

    os.mkfifo(tmp_path / "pipe")
    monkeypatch.setitem(BY_KIND, HangingRecords.kind, HangingRecords)
    config = ScanConfig(max_locations=50)
    pool = ShardPool(HangingRecords.kind, str(tmp_path), config, workers=2, stall_s=1.0)
    pool.ctx = mp.get_context("fork")
    plan = HangingRecords(tmp_path, config).plan()
    progress: list[int] = []
    merged = merge(pool.run(plan.shards, lambda items, _b: progress.append(items)))
    assert [(loc.index, loc.detail) for loc in merged.findings["S001"].locations] == [(37, stall_reason(1.0))]
    assert merged.items == 100 and sum(progress) == 100  # 99 records read, 1 reported
    assert [loc.index for loc in merged.findings["V001"].locations] == [90]
    assert pool.workers == []
