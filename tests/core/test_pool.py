"""The shard pool survives readers that kill their process, and isolates the part that does it."""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import signal
import socket
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


def _fed(shards: list[Shard], workers: int, ahead: int | None = None) -> list[int]:
    """How many shards each worker holds after the pool's first feed (workers with fake pipes)."""
    from collections import deque

    from scanner_service.pool import _Task, _Worker

    pool = ShardPool("unused", "unused", ScanConfig(), workers)
    pool.workers = [_Worker(process=None, conn=_Conn()) for _ in range(workers)]  # type: ignore[arg-type]
    if ahead is not None:
        pool.ahead_bytes = ahead
    pool._feed(deque(_Task(s) for s in shards))
    return [len(w.tasks) for w in pool.workers]


def test_a_worker_gets_a_second_small_shard_while_enough_remain() -> None:
    small = [Shard(id=i, items=1, spec={"start": i}) for i in range(10)]
    assert _fed(small, 2) == [2, 2]
    assert _fed(small[:3], 2) == [1, 1]  # the last shards go to whichever worker is free first
    paths = [f"{j:0100}" for j in range(100)]  # 10 KB pickled
    big = [Shard(id=i, items=1, spec={"paths": paths}) for i in range(10)]
    assert _fed(big, 2) == [1, 1]  # only what fits a pipe's buffer is sent ahead


def test_a_socket_takes_shards_ahead_up_to_a_quarter_of_its_send_buffer() -> None:
    """The head start's verdicts make an image folder's last shards 10-12 KB: where the socket between parent
    and worker says how much it buffers, they are sent ahead too; a plain pipe keeps the portable 8 KB."""
    from scanner_service.pool import AHEAD_BYTES, AHEAD_BYTES_MAX, ahead_bytes

    parent, child = mp.get_context("fork").Pipe()
    with socket.fromfd(parent.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        buffer = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    limit = ahead_bytes(parent)
    assert limit == max(AHEAD_BYTES, min(AHEAD_BYTES_MAX, buffer // 4))
    reader, writer = mp.get_context("fork").Pipe(duplex=False)
    assert ahead_bytes(writer) == AHEAD_BYTES
    for conn in (parent, child, reader, writer):
        conn.close()
    paths = [f"{j:0100}" for j in range(100)]  # 10 KB pickled
    big = [Shard(id=i, items=1, spec={"paths": paths}) for i in range(10)]
    assert _fed(big, 2, ahead=limit) == ([2, 2] if limit > 11_000 else [1, 1])


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


def _children_at_plan(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[int]:
    """Make ``runner.plan_source`` note how many reader processes are alive when the plan is made."""
    from scanner_service import runner

    seen: list[int] = []
    real = runner.plan_source

    def noting(source: Source, config: ScanConfig) -> Plan:
        seen.append(len(mp.active_children()))
        if fail:
            raise KeyboardInterrupt  # (Ctrl-C while a big folder is walked)
        return real(source, config)

    monkeypatch.setattr(runner, "plan_source", noting)
    return seen


def test_image_readers_start_while_the_plan_is_made(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An image folder's plan imports nothing its readers need: one starts first, and imports its decoders
    while the folder is walked; the other formats' readers start after their plan (which imports h5py,
    lmdb ... for them to inherit)."""
    from PIL import Image

    from scanner_service.runner import scan

    (tmp_path / "images").mkdir()
    for i in range(3):
        Image.new("RGB", (40, 40), (i * 60, 9, 9)).save(tmp_path / "images" / f"{i}.png")
    np.save(tmp_path / "a.npy", np.ones((4, 3), np.float32))
    seen = _children_at_plan(monkeypatch)
    report = scan(tmp_path / "images", ScanConfig(), workers=2)
    assert report.summary.items_scanned == 3 and report.summary.errors == 0
    scan(tmp_path / "a.npy", ScanConfig(), workers=2)
    assert seen == [1, 0]
    assert mp.active_children() == []


def test_an_interrupted_plan_leaves_no_reader_behind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from PIL import Image

    from scanner_service.runner import scan

    Image.new("L", (40, 40), 7).save(tmp_path / "a.png")
    seen = _children_at_plan(monkeypatch, fail=True)
    with pytest.raises(KeyboardInterrupt):
        scan(tmp_path, ScanConfig(), workers=1)
    assert seen == [1]
    assert mp.active_children() == []


def test_a_plan_with_nothing_to_read_stops_the_early_reader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A list whose every line names a missing file: findings from the plan, no shard to read."""
    from scanner_service.runner import scan

    (tmp_path / "train.txt").write_text("gone/a.jpg 0\ngone/b.jpg 1\n")
    seen = _children_at_plan(monkeypatch)
    report = scan(tmp_path / "train.txt", ScanConfig(), workers=1)
    assert seen == [1]
    assert [f.name for f in report.findings if f.severity == "error"] == ["missing-file"]
    assert mp.active_children() == []


def test_warm_up_imports_the_image_judges() -> None:
    from scanner_service import imaging
    from scanner_service.sources.images import ImageFilesSource

    imaging._decoder.cache_clear()
    ImageFilesSource.warm_up()
    assert imaging._decoder.cache_info().currsize == 2  # jpeg and png: Pillow only when a file needs it
    imaging._decoder("jpeg")
    assert imaging._decoder.cache_info().hits == 1
